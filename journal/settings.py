"""Where the journal's servers are and how its topic and keyspace look: `Settings`, and the
HTTP API's bearer tokens (`HttpAuthSettings`).

Both are `KJSettings` (kjconfig.settings, the one loader): every field has its `KJ_*` variable
and its flag; a bad value raises `SettingsError` naming the one it came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import Field, FilePath, SecretStr, field_validator, model_validator

from journal.kafka import (
    DEFAULT_ACK_TIMEOUT_S,
    DEFAULT_MAX_KAFKA_ONLY_SCANS,
    DEFAULT_TAIL_FORGOTTEN_CAPACITY,
    DEFAULT_TAIL_MAX_JOURNALS,
)
from journal.store.topology import (
    APPENDS_TTL_MARGIN_S,
    DEFAULT_APPENDS_TTL_S,
    DEFAULT_DOWN_RETRY_S,
    DEFAULT_LISTING_LEASE_S,
    DEFAULT_MAX_SNAPSHOT_BYTES,
    DEFAULT_READ_CONSISTENCY,
    DEFAULT_REPLICATION_WINDOW,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_RETRIES,
    DEFAULT_SEGMENT_SIZE,
    DEFAULT_SPECULATIVE_AFTER_MS,
    DEFAULT_WRITE_CONSISTENCY,
    ReadConsistency,
    WriteConsistency,
    parse_replication,
)
from journal.subscriptions import DEFAULT_MAX_UNACKED
from kjconfig.access import (
    CASSANDRA_ROLES,
    KAFKA_USERS,
    CassandraLogin,
    ClientTls,
    KafkaAccess,
    KafkaProtocol,
    Role,
    ScramLogin,
    ScramMechanism,
    dev_password,
)
from kjconfig.hosts import parse_hosts, shared_port
from kjconfig.settings import KJSettings, Switch

if TYPE_CHECKING:  # loaded on use: the command line's --help needs no drivers
    from journal.codec.envelope import Kek
    from journal.kafka.topic import TopicSpec
    from journal.store.cassandra import CassandraConfig

DAY_MS = 24 * 60 * 60 * 1000

# a quarantine listing (`GET /quarantine?limit=`, `kafka-journal quarantine list --limit`) shows
# the newest this many records, reading only the last this many of each partition
DEFAULT_QUARANTINE_LIMIT = 100
MAX_QUARANTINE_LIMIT = 1000

JwtAlgorithm = Literal["HS256", "RS256", "ES256"]


class HttpAuthSettings(KJSettings):
    """Bearer tokens (JWT) of the HTTP API: how workers check them and clients get them.

    Checking uses one algorithm (a token must say that one: no algorithm confusion) and one
    source of keys: `jwt_key` or `jwt_key_file` (an HS256 secret, or a PEM key for RS256 or
    ES256; a private PEM also lets `kafka-journal token` mint), or `jwt_jwks_file` (public keys
    by `kid`). None of them with HTTP security on: the local stack's key, an HS256 secret
    generated on first use (`app.http_tokens.local_key_file`), so it works with zero config locally.
    """

    http_security: Switch | None = Field(
        default=None, description="HTTP bearer tokens: true | false (default: KJ_SECURITY)"
    )
    jwt_algorithm: JwtAlgorithm = Field(
        default="HS256", description="the one algorithm tokens are signed with"
    )
    jwt_key: SecretStr | None = Field(
        default=None, description="HS256 secret or PEM key (prefer jwt_key_file)"
    )
    jwt_key_file: FilePath | None = Field(
        default=None, description="file holding the HS256 secret or the PEM key"
    )
    jwt_jwks_file: FilePath | None = Field(
        default=None, description="JWKS file of public keys (tokens name theirs by kid)"
    )
    jwt_issuer: str | None = Field(default=None, description="required iss claim, if set")
    jwt_audience: str | None = Field(default=None, description="required aud claim, if set")
    jwt_prefix_claim: str = Field(
        default="journal_prefix",
        min_length=1,
        description="claim limiting a token to journal ids starting with its value",
    )
    jwt_group_prefix_claim: str = Field(
        default="group_prefix",
        min_length=1,
        description="claim limiting a token to subscription groups whose name starts with its "
        "value",
    )
    metrics_open: bool = Field(
        default=False, description="serve /metrics without a token (scrapers inside the network)"
    )
    token: SecretStr | None = Field(
        default=None, description="the bearer token the project's HTTP clients send"
    )

    @model_validator(mode="after")
    def _one_key_source(self) -> Self:
        given = [self.jwt_key, self.jwt_key_file, self.jwt_jwks_file]
        if sum(source is not None for source in given) > 1:
            raise ValueError("give at most one of KJ_JWT_KEY, KJ_JWT_KEY_FILE, KJ_JWT_JWKS_FILE")
        if self.jwt_algorithm != "HS256" and all(source is None for source in given):
            raise ValueError(
                f"KJ_JWT_ALGORITHM={self.jwt_algorithm} needs KJ_JWT_KEY_FILE (a PEM key) or "
                "KJ_JWT_JWKS_FILE: only HS256 has a generated local default"
            )
        return self


class Settings(KJSettings):
    """The journal's servers, topic and keyspace; what the direct client and workers share."""

    tls: Switch = Field(
        default="off",
        description="true (with KJ_SECURITY=true): TLS to Kafka (SASL_SSL) and Cassandra, each "
        "server's certificate and name verified (docs/operations.md)",
    )
    security: Switch = Field(
        default="off",
        description="true: every part authenticates (HTTP bearer tokens; Kafka SASL/SCRAM and "
        "Cassandra logins, with nothing else set as this process's role on the local secured "
        "stack's dev credentials); false: the open local demo (on | off: the old spelling)",
    )
    http_auth: HttpAuthSettings = Field(
        default_factory=lambda: HttpAuthSettings(), description="the HTTP API's bearer tokens"
    )

    kafka_bootstrap: str = Field(
        default="127.0.0.1:9092", description="Kafka servers, host:port,..."
    )
    cassandra_hosts: str = Field(
        default="127.0.0.1",
        description="Cassandra hosts, host[:port],... (a port given here is the Cassandra port)",
    )
    cassandra_port: int = Field(default=9042, gt=0, lt=65536, description="Cassandra's native port")
    topic: str = Field(default="journal", min_length=1, description="the action topic")
    keyspace: str = Field(default="journal", min_length=1, description="the Cassandra keyspace")
    # the action topic, when this process creates it; production: RF 3, min ISR 2 (what the
    # defaults give on 3 brokers or more), >= 24 h
    partitions: int = Field(default=8, gt=0, description="partitions of the topic, when created")
    replication_factor: int | None = Field(
        default=None, gt=0, description="the topic's, when created (default: min(3, brokers))"
    )
    min_insync_replicas: int | None = Field(
        default=None,
        gt=0,
        description="the topic's, when created (default: 2 of 3 replicas, else 1)",
    )
    retention_ms: int = Field(
        default=7 * DAY_MS, gt=0, description="the topic's retention when created; keep it >= 24 h"
    )
    keyspace_replication: str = Field(
        default="auto",
        description="the keyspace's replication, when created: auto (NetworkTopologyStrategy, "
        "each data centre at min(3, its nodes)), DC:REPLICAS,... (datacenter1:3,dc2:3), or a "
        "CQL map; an existing keyspace keeps its own (a warning says when they differ)",
    )
    cassandra_read_consistency: ReadConsistency = Field(
        default=DEFAULT_READ_CONSISTENCY,
        description="consistency of the store's reads (LOCAL_QUORUM: 2 of 3 local replicas, "
        "one node may be down; with the write one it must overlap: docs/operations.md)",
    )
    cassandra_write_consistency: WriteConsistency = Field(
        default=DEFAULT_WRITE_CONSISTENCY,
        description="consistency of replication's writes (LOCAL_QUORUM; EACH_QUORUM for "
        "readers in two data centres: docs/operations.md)",
    )
    cassandra_local_dc: str | None = Field(
        default=None,
        description="this process's Cassandra data centre: requests go to its nodes only "
        "(default: the data centre of the contact point that answers first)",
    )
    cassandra_request_timeout_s: float = Field(
        default=DEFAULT_REQUEST_TIMEOUT_S,
        gt=0,
        description="seconds a Cassandra request may take, retries included, before the store "
        "is called unavailable",
    )
    cassandra_retries: int = Field(
        default=DEFAULT_RETRIES,
        ge=0,
        description="retries of an idempotent Cassandra request at the next node, after a "
        "timeout, too few replicas or a lost connection",
    )
    cassandra_speculative_after_ms: int = Field(
        default=DEFAULT_SPECULATIVE_AFTER_MS,
        ge=0,
        description="ms after which an unanswered idempotent Cassandra request is sent to the "
        "next node as well, the first answer winning (0: never)",
    )
    store_down_retry_s: float = Field(
        default=DEFAULT_DOWN_RETRY_S,
        ge=0,
        description="seconds a process does not ask Cassandra again after a read found it "
        "unavailable (reads go to Kafka alone at once meanwhile), then one read asks; 0: "
        "every read asks",
    )
    segment_size: int = Field(
        default=DEFAULT_SEGMENT_SIZE, gt=0, description="events per segment of new journals"
    )
    appends_ttl_s: int = Field(
        default=DEFAULT_APPENDS_TTL_S,
        ge=0,
        description="seconds an `appends` row lives: subscribers then skip its Append beyond "
        "Kafka's retention (0: while the Append has an event stored); at least the retention "
        "plus 8 days (records outlive it by up to a segment): docs/operations.md",
    )
    listing_lease_s: float = Field(
        default=DEFAULT_LISTING_LEASE_S,
        ge=0,
        description="the same in every process of a deployment: seconds a process uses what it "
        "read of a topic's listing generations (`listing_buckets`) before reading them again; "
        "`schema grow-listing` waits 3 of them (plus a request's timeout) per phase",
    )
    replication_window: int = Field(
        default=DEFAULT_REPLICATION_WINDOW,
        gt=0,
        description="Cassandra requests of a replication batch in flight",
    )
    max_record_bytes: int = Field(default=1_000_000, gt=0, description="largest action record")
    max_snapshot_bytes: int = Field(
        default=DEFAULT_MAX_SNAPSHOT_BYTES,
        gt=0,
        description="largest snapshot payload (stored in Cassandra in chunks, not in Kafka)",
    )
    group_max_unacked: int = Field(
        default=DEFAULT_MAX_UNACKED,
        gt=0,
        description="delivered records a subscription group member holds unacknowledged at "
        "most: at the cap it delivers nothing (heartbeats only) until acks come",
    )
    tail_max_journals: int = Field(
        default=DEFAULT_TAIL_MAX_JOURNALS,
        gt=0,
        description="journals the direct client's tail index holds per partition (~330 B "
        "each): past it a new journal's records are not indexed, and its reads need the store "
        "(a scan, or a prompt 503 with the store down) until replication covers them",
    )
    tail_forgotten_capacity: int = Field(
        default=DEFAULT_TAIL_FORGOTTEN_CAPACITY,
        gt=0,
        description="ids per generation of the tail index's filter of forgotten journals "
        "(12 bits each, two generations per partition: false positives under 1%)",
    )
    max_kafka_only_scans: int = Field(
        default=DEFAULT_MAX_KAFKA_ONLY_SCANS,
        gt=0,
        description="scans of a partition from offset 0 a worker runs at once with Cassandra "
        "down (a read its tables cannot answer yet); one more is refused at once (503), so "
        "reads do not take the CPU the agent needs to index a backlog",
    )
    grow_wait_s: float = Field(
        default=5.0,
        gt=0,
        description="while the topic is grown (docs/growing.md): how long an operation waits "
        "to learn whether its journal's partition is cut when its index cannot tell (it reads "
        "the partition for the Seal); past it, 503 with Retry-After",
    )
    grow_lease_s: float = Field(
        default=1.0,
        ge=0,
        description="the same in every process of a deployment: a direct client that found no "
        "grow planned takes an `ack=kafka` acknowledgement within this long of that read as "
        "below every Seal without reading the registry again, since `topic grow` waits "
        "`SEAL_AFTER_LEASES` times as long after its plan before its first Seal",
    )
    read_fence: Literal["high_watermark", "mark"] = Field(
        default="high_watermark",
        description="how a read learns where now is: the high watermark (a read writes "
        "nothing) or a Mark it produces (kafka-journal's way)",
    )

    kafka_metadata_max_age_s: float = Field(
        default=30.0,
        gt=0,
        description="how often a producer refreshes Kafka's metadata: how soon a running "
        "process sees that its topic's partition count changed, and refuses it",
    )
    kafka_ack_timeout_s: float = Field(
        default=DEFAULT_ACK_TIMEOUT_S,
        gt=0,
        description="seconds an append waits for Kafka's acknowledgement (acks=all) before it "
        "fails as unavailable (503 with Retry-After); above a failover's election",
    )

    role: Role = Field(
        default="client",
        description="which principal this process is (client | replicator | worker): the "
        "default Kafka user and Cassandra role with security on",
    )
    kafka_security_protocol: KafkaProtocol | None = Field(
        default=None,
        description="PLAINTEXT | SASL_PLAINTEXT | SASL_SSL (default: SASL_PLAINTEXT with "
        "security on, SASL_SSL if a CA is set; PLAINTEXT otherwise)",
    )
    kafka_sasl_mechanism: ScramMechanism = Field(
        default="SCRAM-SHA-512", description="the SCRAM mechanism of the Kafka login"
    )
    kafka_username: str | None = Field(
        default=None, description="Kafka SCRAM user (default with security on: journal-<role>)"
    )
    kafka_password: SecretStr | None = Field(
        default=None, description="Kafka SCRAM password (default with security on: the dev one)"
    )
    kafka_password_file: FilePath | None = Field(
        default=None, description="a file holding the Kafka password (instead of the variable)"
    )
    kafka_ssl_cafile: FilePath | None = Field(
        default=None,
        description="PEM CA file Kafka's certificates are verified against (default: the "
        "system's CAs); set alone, it selects SASL_SSL",
    )
    kafka_ssl_certfile: FilePath | None = Field(
        default=None,
        description="this client's PEM certificate chain for mutual TLS with Kafka (it may "
        "hold the key too)",
    )
    kafka_ssl_keyfile: FilePath | None = Field(
        default=None, description="the PEM key of KJ_KAFKA_SSL_CERTFILE, when not in that file"
    )
    cassandra_ssl_cafile: FilePath | None = Field(
        default=None,
        description="PEM CA file Cassandra's certificates are verified against (default: the "
        "system's CAs); set alone, it turns TLS to Cassandra on",
    )
    ssl_check_hostname: bool = Field(
        default=True,
        description="whether a TLS client checks the server's name (host or IP address "
        "connected to) against its certificate; false only for servers named otherwise",
    )
    cassandra_username: str | None = Field(
        default=None,
        description="Cassandra role (default with security on: journal_reader for a client, "
        "journal_writer for a replicator or worker)",
    )
    cassandra_password: SecretStr | None = Field(
        default=None, description="Cassandra password (default with security on: the dev one)"
    )
    cassandra_password_file: FilePath | None = Field(
        default=None, description="a file holding the Cassandra password"
    )

    # crypto-shredding (docs/erasure.md): with a KEK, every journal's payloads are encrypted
    kek: SecretStr | None = Field(
        default=None,
        description="the key-encryption key, 32 bytes in base64 (prefer kek_file): with one, "
        "every journal's payloads are encrypted with a data key of its own, and can be erased",
    )
    kek_file: FilePath | None = Field(
        default=None, description="a file holding the key-encryption key (32 bytes in base64)"
    )
    kek_old_file: FilePath | None = Field(
        default=None,
        description="the previous key-encryption key during a rotation: it only unwraps "
        "(`kafka-journal keys rotate` rewraps its data keys with the current one)",
    )
    key_cache_size: int = Field(
        default=10_000, gt=0, description="journals whose data key a process keeps in memory"
    )
    key_cache_ttl_s: float = Field(
        default=60.0,
        gt=0,
        description="seconds a process trusts a cached data key: after an erasure elsewhere, "
        "it may use the key that long at most",
    )
    seal_appends_once: bool = Field(
        default=True,
        description="seal an encrypted Append's payloads in one envelope (version 2); false: "
        "one envelope an event (version 1), which processes before version 2 read: for a "
        "rolling upgrade, until every process reads version 2",
    )

    @model_validator(mode="after")
    def _appends_outlive_the_log(self) -> Self:
        # within Kafka's retention a subscription takes an Append missing from `appends` for a
        # rejected one: a row must outlive its record
        least = self.retention_ms // 1000 + APPENDS_TTL_MARGIN_S
        if 0 < self.appends_ttl_s < least:
            raise ValueError(
                f"KJ_APPENDS_TTL_S must be 0 or at least KJ_RETENTION_MS plus 8 days ({least} "
                "s): a subscription takes an Append without its row for a rejected one"
            )
        return self

    @model_validator(mode="after")
    def _one_kek(self) -> Self:
        if self.kek is not None and self.kek_file is not None:
            raise ValueError("give at most one of KJ_KEK, KJ_KEK_FILE")
        if self.kek_old_file is not None and self.kek is None and self.kek_file is None:
            raise ValueError("KJ_KEK_OLD_FILE needs the current key (KJ_KEK_FILE or KJ_KEK)")
        return self

    @property
    def encrypted(self) -> bool:
        """Whether journals are encrypted (a key-encryption key is given)."""
        return self.kek is not None or self.kek_file is not None

    def keks(self) -> tuple[Kek, tuple[Kek, ...]] | None:
        """The key-encryption key, and the previous one if rotating; None without one."""
        from journal.codec.envelope import FileKek

        if self.kek_file is not None:
            current = FileKek.of_file(self.kek_file)
        elif self.kek is not None:
            current = FileKek.of_text(self.kek.get_secret_value())
        else:
            return None
        old = () if self.kek_old_file is None else (FileKek.of_file(self.kek_old_file),)
        return current, old

    def kafka_access(self) -> KafkaAccess:
        """How this process reaches Kafka: the servers and its login (kjconfig.access)."""
        protocol = self.kafka_security_protocol or (
            "PLAINTEXT"
            if self.security == "off"
            else "SASL_SSL"
            if self.tls == "on" or self.kafka_ssl_cafile is not None
            else "SASL_PLAINTEXT"
        )
        if protocol == "PLAINTEXT":
            return KafkaAccess(self.kafka_bootstrap)
        user = self.kafka_username or KAFKA_USERS[self.role]
        password = _secret(self.kafka_password, self.kafka_password_file) or dev_password(user)
        login = ScramLogin(user, password, self.kafka_sasl_mechanism)
        tls = None
        if protocol == "SASL_SSL":
            tls = ClientTls(
                self.kafka_ssl_cafile,
                self.kafka_ssl_certfile,
                self.kafka_ssl_keyfile,
                self.ssl_check_hostname,
            )
        return KafkaAccess(self.kafka_bootstrap, login, tls)

    def cassandra_tls(self) -> ClientTls | None:
        """TLS to Cassandra: with KJ_TLS or a CA file set, else None (plaintext)."""
        if self.tls == "off" and self.cassandra_ssl_cafile is None:
            return None
        return ClientTls(self.cassandra_ssl_cafile, check_hostname=self.ssl_check_hostname)

    def cassandra_login(self) -> CassandraLogin | None:
        """This process's Cassandra role, or None (no authentication) with security off and
        no role set."""
        if self.security == "off" and self.cassandra_username is None:
            return None
        role = self.cassandra_username or CASSANDRA_ROLES[self.role]
        password = _secret(self.cassandra_password, self.cassandra_password_file)
        return CassandraLogin(role, password or dev_password(role))

    @property
    def http_security_on(self) -> bool:
        """Whether the HTTP API demands tokens: KJ_HTTP_SECURITY, else KJ_SECURITY."""
        return (self.http_auth.http_security or self.security) == "on"

    @model_validator(mode="after")
    def _tls_with_logins(self) -> Self:
        # Kafka's TLS here is SASL_SSL: without logins there is no protocol to speak
        if self.tls == "on" and self.security == "off":
            raise ValueError("KJ_TLS=true needs KJ_SECURITY=true (Kafka's TLS is SASL_SSL)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _port_from_hosts(cls, values: Any) -> Any:
        """`KJ_CASSANDRA_HOSTS=cassandra:9042`: the hosts' port becomes `cassandra_port` (as a
        stack's external Cassandra's does), so the hosts keep no port and the port one place."""
        if not isinstance(values, dict) or not isinstance(values.get("cassandra_hosts"), str):
            return values
        try:
            hosts = parse_hosts(values["cassandra_hosts"])
        except ValueError:
            return values  # `_hosts` names the variable
        port = shared_port(hosts)
        if port is None:
            return values
        bare = ",".join(host for host, _port in hosts)
        return {**values, "cassandra_hosts": bare, "cassandra_port": port}

    @field_validator("keyspace_replication")
    @classmethod
    def _replication(cls, raw: str) -> str:
        parse_replication(raw)
        return raw.strip()

    @field_validator("cassandra_hosts")
    @classmethod
    def _hosts(cls, raw: str) -> str:
        parse_hosts(raw)
        return raw

    @property
    def cassandra_host_list(self) -> tuple[str, ...]:
        return tuple(host for host, _port in parse_hosts(self.cassandra_hosts))

    def cassandra_config(self) -> CassandraConfig:
        from journal.store.cassandra import CassandraConfig

        return CassandraConfig(
            hosts=self.cassandra_host_list,
            port=self.cassandra_port,
            keyspace=self.keyspace,
            replication=self.keyspace_replication,
            segment_size=self.segment_size,
            read_consistency=self.cassandra_read_consistency,
            write_consistency=self.cassandra_write_consistency,
            local_dc=self.cassandra_local_dc,
            request_timeout_s=self.cassandra_request_timeout_s,
            retries=self.cassandra_retries,
            speculative_after_ms=self.cassandra_speculative_after_ms,
            window=self.replication_window,
            login=self.cassandra_login(),
            tls=self.cassandra_tls(),
            create_schema=self.security == "off",
            max_snapshot_bytes=self.max_snapshot_bytes,
            appends_ttl_s=self.appends_ttl_s,
            listing_lease_s=self.listing_lease_s,
        )

    def topic_spec(self) -> TopicSpec:
        from journal.kafka.topic import TopicSpec

        return TopicSpec(
            self.topic,
            self.partitions,
            self.replication_factor,
            self.min_insync_replicas,
            self.retention_ms,
        )


def _secret(value: SecretStr | None, file: Path | None) -> SecretStr | None:
    """A password from its variable, or else from its file (trailing newline dropped)."""
    if value is not None:
        return value
    if file is not None:
        return SecretStr(file.read_text(encoding="utf-8").rstrip("\r\n"))
    return None
