"""A worker's settings: the journal's (`journal.settings.Settings`) plus its own place.

Every value has a `KJ_*` variable (KJ_HTTP_HOST, KJ_HTTP_URL, KJ_HTTP_PORT, KJ_WORKER_DIR, ...) and
a flag of `kafka-journal worker` (see `kjconfig.settings.KJSettings`, which also keeps the old
names KJ_WEB_* and KJ_DATADIR working); flags win.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import AliasChoices, Field, FilePath, model_validator

from agents.limits import (
    DEFAULT_CACHED_ROWS,
    DEFAULT_CATCH_UP_CONCURRENCY,
    DEFAULT_QUEUED_RECORDS,
)
from journal.settings import Settings
from kjconfig.access import ClientTls
from kjconfig.settings import KJSettings
from tables.limits import (
    DEFAULT_EXPIRY_BUILD_STEP,
    DEFAULT_EXPIRY_WINDOW,
    DEFAULT_RESTORE_AHEAD_MIN,
)
from tables.pruning import DEFAULT_PRUNE_INTERVAL_S, DEFAULT_PRUNE_KEYS_PER_STEP
from web.limits import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_GROUP_STREAMS

DEFAULT_APP_ID = "kafka-journal"  # the worker's consumer group and its topics' prefix
_WILDCARDS = ("0.0.0.0", "::", "[::]")  # bind addresses that name no one interface


class WorkerSettings(KJSettings):
    journal: Settings = Field(
        default_factory=lambda: Settings(role="worker"), description="the journal's settings"
    )
    web_host: str = Field(
        default="127.0.0.1",
        validation_alias=AliasChoices("KJ_HTTP_HOST", "web_host"),
        description="HTTP address to bind (0.0.0.0: every interface)",
    )
    web_port: int = Field(
        default=6066,
        gt=0,
        lt=65536,
        validation_alias=AliasChoices("KJ_HTTP_PORT", "web_port"),
        description="HTTP port",
    )
    web_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("KJ_HTTP_URL", "web_url"),
        description="the URL other workers forward requests to and the worker announces "
        "(default http://<HTTP host>:<HTTP port>; needed when the HTTP host is 0.0.0.0 or ::)",
    )
    datadir: Path = Field(  # the factory only types it: _datadir_per_port sets the default
        default_factory=lambda: Path(".worker"),
        validation_alias=AliasChoices("KJ_WORKER_DIR", "datadir"),
        description="tables' local state (default .worker/<port>)",
    )
    static_membership: bool = Field(
        default=True,
        description="join the consumer group as a static member (KIP-345): a worker killed "
        "and restarted within the session timeout takes its partitions back without a "
        "rebalance; false: a dynamic member, whose restart waits for the next rebalance",
    )
    instance_id: str | None = Field(
        default=None,
        description="the static member's id, unique in the group and the same across restarts "
        "(default <hostname>-<HTTP port>: set it where the hostname changes with a restart)",
    )
    session_timeout_s: float = Field(
        default=30.0,
        ge=6.0,  # the brokers' group.min.session.timeout.ms
        le=90.0,  # Faust's request timeout: the session timeout must not exceed it
        description="how long the group waits for a silent worker: a static member restarted "
        "within it keeps its partitions; one that does not come back has its partitions "
        "reassigned after it (they are served by scanning and forwarding meanwhile)",
    )
    app_id: str = Field(
        default=DEFAULT_APP_ID,
        min_length=1,
        description="the consumer group and the tables' prefix",
    )
    max_body_bytes: int = Field(
        default=DEFAULT_MAX_BODY_BYTES, gt=0, description="largest HTTP request body"
    )
    max_group_streams: int = Field(
        default=DEFAULT_MAX_GROUP_STREAMS,
        gt=0,
        description="subscription group streams this worker serves at once, each a Kafka "
        "consumer; the next gets 503 group_streams_full with Retry-After",
    )
    read_wait_s: float = Field(
        default=2.0,
        gt=0,
        description="how long a read waits for the owner's agent to reach the read's fence",
    )
    http_ssl_certfile: FilePath | None = Field(
        default=None,
        description="the worker's PEM certificate chain (it may hold the key too): set, the "
        "HTTP API is served over HTTPS only",
    )
    http_ssl_keyfile: FilePath | None = Field(
        default=None, description="the PEM key of KJ_HTTP_SSL_CERTFILE, when not in that file"
    )
    http_ssl_cafile: FilePath | None = Field(
        default=None,
        description="PEM CA file the other workers' HTTPS certificates are verified against "
        "when forwarding (default: the system's CAs)",
    )
    http_ssl_client_cafile: FilePath | None = Field(
        default=None,
        description="PEM CA file of the client certificates the HTTPS API requires (mutual "
        "TLS; a worker forwarding presents KJ_HTTP_SSL_CERTFILE); default: none required",
    )
    prune_keys_per_step: int = Field(
        default=DEFAULT_PRUNE_KEYS_PER_STEP,
        gt=0,
        description="offset table entries a worker reads per step (one per flush of a "
        "partition) looking for journals whose records left Kafka, to delete them",
    )
    prune_interval_s: float = Field(
        default=DEFAULT_PRUNE_INTERVAL_S,
        gt=0,
        description="how often the worker asks Kafka for its partitions' log starts (what "
        "the offset tables keep: entries whose records are all below them go)",
    )
    restore_ahead_min: int = Field(
        default=DEFAULT_RESTORE_AHEAD_MIN,
        gt=0,
        description="changelog records a table partition must have to restore for the worker "
        "to read them itself (all of a table's partitions in one pass of its kept consumer, a "
        "batch per RocksDB write) before Faust's recovery (which handles ~20,000 records/s, "
        "less with many short partitions); below this Faust's recovery restores it alone",
    )
    expiry_window: int = Field(
        default=DEFAULT_EXPIRY_WINDOW,
        gt=0,
        description="expiry deadlines a worker holds in memory per owned partition, the "
        "soonest; a load of them (at the assignment, and when the clock passes the last) "
        "reads this many of the partition's deadlines by time, however many journals expire",
    )
    expiry_build_step: int = Field(
        default=DEFAULT_EXPIRY_BUILD_STEP,
        gt=0,
        description="after an upgrade, expiry deadlines a worker indexes by time per step (at "
        "most one every 10 ms per partition, while its agent handles the partition's records); "
        "until a partition's are all indexed, its window is loaded by a scan of them all",
    )
    catch_up_concurrency: int = Field(
        default=DEFAULT_CATCH_UP_CONCURRENCY,
        gt=0,
        description="partitions catching up from Kafka at once after an assignment (each with "
        "a consumer of its own); the others wait their turn, their reads scanning meanwhile",
    )
    replication_cached_rows: int = Field(
        default=DEFAULT_CACHED_ROWS,
        gt=0,
        description="journals' rows replication keeps in memory per owned partition (~280 B "
        "each), the least recently written out first; a journal not among them has its row "
        "read from the store before its next write",
    )
    replication_queued_records: int = Field(
        default=DEFAULT_QUEUED_RECORDS,
        gt=0,
        description="actions the agent handled and replication has not written yet, held in "
        "memory per owned partition (~1.2 KB each with their events); past it the partition's "
        "queue is dropped and its replication replays it from Kafka",
    )
    rocksdb_memory_bytes: int = Field(
        default=256 * 1024**2,
        ge=16 * 1024**2,
        description="RocksDB memory of the worker's tables, all their partitions together: "
        "one block cache, their write buffers charged to it (past half of it, the largest is "
        "flushed)",
    )
    rocksdb_max_open_files: int = Field(
        default=4096,
        gt=0,
        description="files the worker's table databases keep open, all together (divided "
        "among them, at least 16 each)",
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="text, or json: one JSON object per line (app/logs.py)"
    )

    @model_validator(mode="before")
    @classmethod
    def _worker_principal(cls, values: Any) -> Any:
        """A worker appends and replicates: it is the worker principal (kjconfig.access),
        whatever KJ_ROLE says; explicit usernames still win."""
        if isinstance(values, dict) and isinstance(values.get("journal"), Settings):
            return {**values, "journal": values["journal"].replace(role="worker")}
        return values

    @model_validator(mode="before")
    @classmethod
    def _datadir_per_port(cls, values: Any) -> Any:
        """Workers on one machine differ by port, so by default their state does too."""
        if not isinstance(values, dict) or values.get("datadir") or values.get("KJ_WORKER_DIR"):
            return values
        port = values.get("web_port", values.get("KJ_HTTP_PORT", 6066))
        return {**values, "datadir": f".worker/{port}"}

    @model_validator(mode="after")
    def _reachable_url(self) -> Self:
        """Forwarding needs an address others can reach: a wildcard bind is none."""
        if self.web_url is None and self.web_host in _WILDCARDS:
            raise ValueError(
                f"KJ_HTTP_HOST={self.web_host} binds every interface: set KJ_HTTP_URL to the URL "
                "other workers reach this one at"
            )
        return self

    @model_validator(mode="after")
    def _key_with_its_certificate(self) -> Self:
        if self.http_ssl_certfile is None and (
            self.http_ssl_keyfile is not None or self.http_ssl_client_cafile is not None
        ):
            raise ValueError(
                "KJ_HTTP_SSL_KEYFILE and KJ_HTTP_SSL_CLIENT_CAFILE need KJ_HTTP_SSL_CERTFILE"
            )
        return self

    @property
    def https(self) -> bool:
        return self.http_ssl_certfile is not None

    @property
    def group_instance_id(self) -> str | None:
        """The consumer's group.instance.id: None for a dynamic member."""
        if not self.static_membership:
            return None
        # the port tells apart workers of one host (they cannot share it), the hostname hosts
        return self.instance_id or f"{socket.gethostname()}-{self.web_port}"

    def app_id_on(self, topic: str) -> str:
        """The Faust app id (its consumer group, its changelogs' and its own topics' prefix) of
        a worker whose app runs on `topic` of the chain (docs/growing.md, "The workers move to
        the grown topic"): the configured one on the chain's first topic, `<app_id>-<topic>`
        on a grown one: a group and tables of its own, of its own partition count, whose
        changelogs keep the `<app_id>-` prefix `kafka-journal provision` grants."""
        return self.app_id if topic == self.journal.topic else f"{self.app_id}-{topic}"

    def datadir_on(self, topic: str) -> Path:
        """The tables' local state of an app on `topic` (`app_id_on`): a grown topic's apart,
        as its tables have other partitions than the first topic's."""
        return self.datadir if topic == self.journal.topic else self.datadir / self.app_id_on(topic)

    @property
    def url(self) -> str:
        """Where other workers and clients reach this worker (KJ_HTTP_URL or the bind address)."""
        scheme = "https" if self.https else "http"
        return self.web_url or f"{scheme}://{self.web_host}:{self.web_port}"

    def server_ssl_context(self) -> ssl.SSLContext | None:
        """The HTTPS API's context (KJ_HTTP_SSL_CERTFILE), None for plain HTTP."""
        if self.http_ssl_certfile is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        keyfile = None if self.http_ssl_keyfile is None else str(self.http_ssl_keyfile)
        context.load_cert_chain(str(self.http_ssl_certfile), keyfile)
        if self.http_ssl_client_cafile is not None:  # mutual TLS: no certificate, no request
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(str(self.http_ssl_client_cafile))
        return context

    def forwarding_tls(self) -> ClientTls:
        """How this worker verifies the others when it forwards to them over HTTPS, and the
        certificate it presents if they ask for one (mutual TLS): its own."""
        return ClientTls(
            self.http_ssl_cafile,
            self.http_ssl_certfile,
            self.http_ssl_keyfile,
            self.journal.ssl_check_hostname,
        )
