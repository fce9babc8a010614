"""Connecting to Cassandra: the store's `CassandraConfig`, and the driver's cluster with our
execution profiles (the local data centre, consistency, timeout, retries, speculative
executions), protocol version and reconnection policy. A cluster no host of which answers is
`StoreUnavailable`; a refused login is `StoreLoginRefused` and a failed TLS verification
`TlsRefused` (no wait cures either).

Riding through one slow or dead node (of three replicas, reads and writes at LOCAL_QUORUM):
the token-aware policy sends a request to a replica of its partition in the local data
centre; a node killed closes its connections, so the driver marks it down at once and sends
nothing more there; a request in flight on it fails with a connection error, and one the
coordinator cannot complete answers a timeout or Unavailable: `IdempotentRetryPolicy` sends an
idempotent request again to the next host, `retries` times at most. A node slow but alive is
what a speculative execution is for: an idempotent request unanswered after
`speculative_after_ms` goes to the next host too, and the first answer wins. Both only for
idempotent statements (`statements.py` marks them; every write of the store is one: a
stamped cell written twice is the same cell), so nothing is applied twice that could differ.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cassandra import AuthenticationFailed, ConsistencyLevel, WriteType
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    Session,
)
from cassandra.policies import (
    ConstantSpeculativeExecutionPolicy,
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    RetryPolicy,
    TokenAwarePolicy,
)
from cassandra.query import named_tuple_factory, tuple_factory

from journal.errors import StoreLoginRefused, StoreUnavailable
from journal.store.topology import (
    DEFAULT_APPENDS_TTL_S,
    DEFAULT_LISTING_LEASE_S,
    DEFAULT_MAX_SNAPSHOT_BYTES,
    DEFAULT_READ_CONSISTENCY,
    DEFAULT_REPLICATION_WINDOW,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_RETRIES,
    DEFAULT_SEGMENT_SIZE,
    DEFAULT_SPECULATIVE_AFTER_MS,
    DEFAULT_WRITE_CONSISTENCY,
)
from kjconfig.access import CassandraLogin, ClientTls, refuse_plaintext_to_tls

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 4  # the native protocol every client of ours speaks (see `open_session`)
# the execution profile whose rows are plain tuples: the hot reads (a journal's events) take
# their columns by position, without the default's namedtuple class per page and per row
ROWS_AS_TUPLES = "rows_as_tuples"
_RECONNECT_MAX_DELAY_S = 10.0  # between attempts to reach a Cassandra host that went down
# executions of a request beside the first: one for a slow node, one more if the next is too
_SPECULATIVE_EXECUTIONS = 2


@dataclass(frozen=True, slots=True)
class CassandraConfig:
    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    keyspace: str = "journal"
    # "auto", "dc1:3,dc2:3" or a CQL map: `topology.parse_replication`
    replication: str = "auto"
    segment_size: int = DEFAULT_SEGMENT_SIZE
    read_consistency: str = DEFAULT_READ_CONSISTENCY
    write_consistency: str = DEFAULT_WRITE_CONSISTENCY
    local_dc: str | None = None  # None: the data centre of the contact point that answers first
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    speculative_after_ms: int = DEFAULT_SPECULATIVE_AFTER_MS  # 0: no speculative executions
    window: int = DEFAULT_REPLICATION_WINDOW  # requests of one replication batch in flight
    login: CassandraLogin | None = None  # None: no authentication
    tls: ClientTls | None = None  # None: plaintext
    # False with security on: the project's roles may not create schema; the admin does
    create_schema: bool = True
    max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES
    # a snapshot's payload is written in rows of this size: no single cell or mutation comes
    # near Cassandra's limits (a mutation must fit half a commit log segment, 16 MiB by default)
    snapshot_chunk_bytes: int = 512 * 1024
    # seconds an `appends` row lives, 0: until a Delete or Purge removes its Append's events
    appends_ttl_s: int = DEFAULT_APPENDS_TTL_S
    # seconds a read of a topic's listing generations is used (`ListingViews`)
    listing_lease_s: float = DEFAULT_LISTING_LEASE_S


def reconnection_policy() -> ExponentialReconnectionPolicy:
    """How the driver tries a host that went down again: never giving up (its default stops
    after 64 attempts, and a worker would stay without its store for good), at most
    `_RECONNECT_MAX_DELAY_S` apart (its default backs off to 10 minutes: after a 4-minute
    outage a worker went on failing 4 more minutes against a Cassandra that was back)."""
    return ExponentialReconnectionPolicy(
        base_delay=0.5, max_delay=_RECONNECT_MAX_DELAY_S, max_attempts=None
    )


class IdempotentRetryPolicy(RetryPolicy):  # type: ignore[misc]
    """Retry an idempotent request at the next host, up to `retries` times, when its
    coordinator timed out, had too few replicas alive, or its connection failed; never a
    request that is not idempotent (it may have been applied: the caller must decide)."""

    def __init__(self, retries: int) -> None:
        self.retries = retries

    def _again(self, query: Any, retry_num: int) -> tuple[int, None]:
        if retry_num < self.retries and getattr(query, "is_idempotent", False):
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None

    def on_read_timeout(
        self,
        query: Any,
        consistency: int,
        required_responses: int,
        received_responses: int,
        data_retrieved: bool,
        retry_num: int,
    ) -> tuple[int, None]:
        return self._again(query, retry_num)

    def on_write_timeout(
        self,
        query: Any,
        consistency: int,
        write_type: int,
        required_responses: int,
        received_responses: int,
        retry_num: int,
    ) -> tuple[int, None]:
        if write_type in (WriteType.CAS, WriteType.COUNTER):  # none here, and never safe
            return self.RETHROW, None
        return self._again(query, retry_num)

    def on_unavailable(
        self,
        query: Any,
        consistency: int,
        required_replicas: int,
        alive_replicas: int,
        retry_num: int,
    ) -> tuple[int, None]:
        # another coordinator may see the replicas alive that this one has not yet noticed
        return self._again(query, retry_num)

    def on_request_error(
        self, query: Any, consistency: int, error: Exception, retry_num: int
    ) -> tuple[int, None]:
        return self._again(query, retry_num)


def execution_profile(config: CassandraConfig, row_factory: Callable[..., Any]) -> ExecutionProfile:
    """How every request runs: in the local data centre (token-aware: at a replica), at the
    read consistency unless its statement says the write one (`statements.py`), within the
    timeout, retried and speculated as the module says."""
    speculative = (
        ConstantSpeculativeExecutionPolicy(
            config.speculative_after_ms / 1000, _SPECULATIVE_EXECUTIONS
        )
        if config.speculative_after_ms > 0
        else None
    )
    return ExecutionProfile(
        # no remote data centre's host is ever used: LOCAL_* consistency is about this one
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(config.local_dc or "")),
        retry_policy=IdempotentRetryPolicy(config.retries),
        consistency_level=ConsistencyLevel.name_to_value[config.read_consistency],
        request_timeout=config.request_timeout_s,
        speculative_execution_policy=speculative,
        row_factory=row_factory,
    )


def write_level(config: CassandraConfig) -> int:
    """The driver's value of the write consistency, for the write statements."""
    return int(ConsistencyLevel.name_to_value[config.write_consistency])


async def open_session(config: CassandraConfig) -> tuple[Cluster, Session]:
    """A cluster of `config`'s hosts and a session on it (not bound to the keyspace)."""

    def profile(row_factory: Callable[..., Any]) -> ExecutionProfile:
        return execution_profile(config, row_factory)

    cluster = Cluster(
        list(config.hosts),
        port=config.port,
        execution_profiles={
            EXEC_PROFILE_DEFAULT: profile(named_tuple_factory),
            ROWS_AS_TUPLES: profile(row_factory=tuple_factory),
        },
        # v4, not v5: the driver checks v5's segment headers with a CRC computed in Python
        # (per segment, both ways) and now and then rejects a good one at connect ("CRC
        # mismatch on header", PYTHON-1337; seen once in our CI); v4 has no segments
        protocol_version=PROTOCOL_VERSION,
        auth_provider=None if config.login is None else config.login.auth_provider(),
        ssl_context=None if config.tls is None else config.tls.context(),
        reconnection_policy=reconnection_policy(),
        # without it, a request written while the previous one's segment is unacknowledged
        # waits for Linux's delayed ACK (Nagle): ~40 ms, most of a worker's store batch
        sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )
    try:
        session = await asyncio.to_thread(cluster.connect)  # connect blocks: not on the loop
    except NoHostAvailable as error:
        await asyncio.to_thread(cluster.shutdown)
        if login_refused(error):
            # a wrong login is no outage: waiting would not cure it
            raise StoreLoginRefused(f"Cassandra refused the login: {error}") from error
        # nor is a certificate that fails verification, nor a TLS-only server to a plaintext
        # client: TlsRefused says which server and why
        addresses = [(host, config.port) for host in config.hosts]
        if config.tls is not None:
            await asyncio.to_thread(config.tls.check_all, addresses)
        else:
            await asyncio.to_thread(refuse_plaintext_to_tls, addresses)
        raise StoreUnavailable(f"Cassandra: no host reachable: {error}") from error
    dcs = {host.datacenter for host in cluster.metadata.all_hosts()}
    if config.local_dc is None and len(dcs) > 1:
        log.warning(
            "Cassandra has data centres %s and KJ_CASSANDRA_LOCAL_DC is not set: the first "
            "contact point that answered chose this process's; set it (docs/operations.md)",
            sorted(dcs),
        )
    return cluster, session


def login_refused(error: NoHostAvailable) -> bool:
    """Whether a host refused the login. The driver's `errors` is a dict by host, but a list in
    some of its paths (seen while Cassandra was starting)."""
    errors = error.errors
    found = errors.values() if isinstance(errors, dict) else (errors or ())
    return any(isinstance(e, AuthenticationFailed) for e in found)
