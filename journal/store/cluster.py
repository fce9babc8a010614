"""Connecting to Cassandra: the store's `CassandraConfig`, and the driver's cluster with our
execution profiles, protocol version and reconnection policy. A cluster no host of which
answers is `StoreUnavailable`; a refused login is `StoreLoginRefused` (no wait cures it)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cassandra import AuthenticationFailed, ConsistencyLevel
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    Session,
)
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    TokenAwarePolicy,
)
from cassandra.query import named_tuple_factory, tuple_factory

from journal.errors import StoreLoginRefused, StoreUnavailable
from kjconfig.access import CassandraLogin

PROTOCOL_VERSION = 4  # the native protocol every client of ours speaks (see `open_session`)
# the execution profile whose rows are plain tuples: the hot reads (a journal's events) take
# their columns by position, without the default's namedtuple class per page and per row
ROWS_AS_TUPLES = "rows_as_tuples"
_RECONNECT_MAX_DELAY_S = 10.0  # between attempts to reach a Cassandra host that went down


@dataclass(frozen=True, slots=True)
class CassandraConfig:
    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 9042
    keyspace: str = "journal"
    replication: str = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    segment_size: int = 100_000
    consistency: str = "LOCAL_QUORUM"
    request_timeout_s: float = 10.0
    window: int = 64  # requests of one replication batch in flight
    login: CassandraLogin | None = None  # None: no authentication
    # False with security on: the project's roles may not create schema; the admin does
    create_schema: bool = True
    max_snapshot_bytes: int = 16 * 2**20
    # a snapshot's payload is written in rows of this size: no single cell or mutation comes
    # near Cassandra's limits (a mutation must fit half a commit log segment, 16 MiB by default)
    snapshot_chunk_bytes: int = 512 * 1024


def reconnection_policy() -> ExponentialReconnectionPolicy:
    """How the driver tries a host that went down again: never giving up (its default stops
    after 64 attempts, and a worker would stay without its store for good), at most
    `_RECONNECT_MAX_DELAY_S` apart (its default backs off to 10 minutes: after a 4-minute
    outage a worker went on failing 4 more minutes against a Cassandra that was back)."""
    return ExponentialReconnectionPolicy(
        base_delay=0.5, max_delay=_RECONNECT_MAX_DELAY_S, max_attempts=None
    )


async def open_session(config: CassandraConfig) -> tuple[Cluster, Session]:
    """A cluster of `config`'s hosts and a session on it (not bound to the keyspace)."""

    def profile(row_factory: Callable[..., Any]) -> ExecutionProfile:
        return ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
            consistency_level=ConsistencyLevel.name_to_value[config.consistency],
            request_timeout=config.request_timeout_s,
            row_factory=row_factory,
        )

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
        raise StoreUnavailable(f"Cassandra: no host reachable: {error}") from error
    return cluster, session


def login_refused(error: NoHostAvailable) -> bool:
    """Whether a host refused the login. The driver's `errors` is a dict by host, but a list in
    some of its paths (seen while Cassandra was starting)."""
    errors = error.errors
    found = errors.values() if isinstance(errors, dict) else (errors or ())
    return any(isinstance(e, AuthenticationFailed) for e in found)
