"""Real readiness probes: a server is healthy only when it answers its own protocol.

Contract:
- `kafka_metadata(bootstrap, timeout)` bootstraps aiokafka's admin client (ApiVersions, then
  Metadata) and asks it to describe the cluster. It returns the cluster id and the brokers the
  cluster advertises, or raises `ProbeError`. A listening port is not enough: a KRaft broker
  answers Metadata only once it has joined the quorum and caught up. It is blocking and runs
  its own event loop (in a thread when the caller's is running), so it works from sync code,
  threads and running loops alike.
- `kafka_quorum(kafka, timeout)` asks for the KRaft controller quorum (DescribeQuorum, which a
  broker forwards to the active controller; aiokafka has no call for it, so the request is
  declared here): its leader and voters. `under_replicated(kafka, timeout)` counts the
  partitions whose in-sync replicas are fewer than their replicas. Both run as the probe does.
- `cassandra_release_version(hosts, port, timeout)` opens a real cassandra-driver session and
  reads `release_version` from `system.local`, or raises `ProbeError`. A plain TCP connect goes
  first, so polling a server that is still booting costs no driver set-up and logs no warnings.
Both are bounded by `timeout` (roughly; the drivers add their own small overheads).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)

T = TypeVar("T")

if TYPE_CHECKING:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.client import AIOKafkaClient

    from kjconfig.access import CassandraLogin, ClientTls, KafkaAccess


class ProbeError(Exception):
    """The server did not answer its protocol (yet)."""


STATUS_PROBE_S = 3.0  # how long `healthy` and `status` wait for a server's answer


def answers(probe: Callable[[float], object]) -> bool:
    """Whether the server answers its protocol now: a server's `healthy`."""
    try:
        probe(STATUS_PROBE_S)
    except ProbeError:
        return False
    return True


def until_answered(
    probe: Callable[[], T],
    within_s: float,
    *,
    between: Callable[[], None] = lambda: None,
    max_pause_s: float = 1.0,
) -> T:
    """`probe()`'s answer, calling it again after a `ProbeError` (only: anything else is a bug
    or a verdict, raised at once) with jittered, growing pauses, for up to `within_s`; then the
    last ProbeError. `between` runs before each pause and may raise to give up early (the JVM
    died: no point waiting)."""

    def before_pause(_state: RetryCallState) -> None:
        between()

    retrying = Retrying(
        retry=retry_if_exception_type(ProbeError),
        stop=stop_after_delay(within_s),
        wait=wait_random_exponential(multiplier=0.1, max=max_pause_s),
        before_sleep=before_pause,
        reraise=True,
    )
    return retrying(probe)


@dataclass(frozen=True)
class KafkaBroker:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class KafkaMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[KafkaBroker, ...]


@dataclass(frozen=True)
class KafkaQuorum:
    leader_id: int
    voters: tuple[int, ...]


async def _with_admin(
    kafka: KafkaAccess, within_s: float, ask: Callable[[AIOKafkaAdminClient], Awaitable[T]]
) -> T:
    # Imported here, as the Cassandra driver below: settings and CLI help must not pay for it.
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**_client_options(kafka, within_s))
    try:
        async with asyncio.timeout(within_s):
            await admin.start()
            return await ask(admin)
    finally:
        await admin.close()


async def _with_client(
    kafka: KafkaAccess, within_s: float, ask: Callable[[AIOKafkaClient], Awaitable[T]]
) -> T:
    """As `_with_admin`, with a plain client: for a request the admin client does not offer."""
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(**_client_options(kafka, within_s))
    try:
        async with asyncio.timeout(within_s):
            await client.bootstrap()
            return await ask(client)
    finally:
        await client.close()


def _client_options(kafka: KafkaAccess, within_s: float) -> dict[str, Any]:
    return {
        **kafka.client_options(),
        "client_id": "kafka-journal-stack",
        "request_timeout_ms": max(1, int(within_s * 1000)),
    }


def _ask_kafka(kafka: KafkaAccess, timeout: float, asking: Callable[[], Awaitable[T]]) -> T:
    """`asking`'s answer (`_with_admin` or `_with_client` on `kafka`), on a loop of its own;
    Kafka's failures as ProbeError."""
    from aiokafka.errors import KafkaError

    async def ask() -> T:
        return await asking()

    def run() -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: run one here
            return asyncio.run(ask())
        # a running loop cannot be blocked into: give the probe its own loop in a thread
        with ThreadPoolExecutor(1, thread_name_prefix="kafka-probe") as pool:
            return pool.submit(asyncio.run, ask()).result()

    bootstrap = kafka.bootstrap
    try:
        with _quiet("aiokafka"):
            return run()
    except TimeoutError as error:
        raise ProbeError(f"Kafka at {bootstrap}: no answer within {timeout:g} s") from error
    except (KafkaError, OSError) as error:
        raise ProbeError(f"Kafka at {bootstrap}: {error}") from error


async def _describe_cluster(admin: AIOKafkaAdminClient) -> dict[str, Any]:
    cluster: dict[str, Any] = await admin.describe_cluster()
    return cluster


def kafka_metadata(kafka: KafkaAccess, timeout: float = 5.0) -> KafkaMetadata:
    """Ask the bootstrap servers for cluster metadata (see the module contract)."""
    bootstrap = kafka.bootstrap
    cluster = _ask_kafka(kafka, timeout, lambda: _with_admin(kafka, timeout, _describe_cluster))
    brokers = tuple(KafkaBroker(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"])
    if not brokers:
        raise ProbeError(f"Kafka at {bootstrap} lists no brokers yet")
    return KafkaMetadata(cluster["cluster_id"], cluster["controller_id"], brokers)


async def _describe_quorum(client: AIOKafkaClient) -> KafkaQuorum:
    from stack.quorum import describe_quorum

    leader, voters = await describe_quorum(client)
    return KafkaQuorum(leader, voters)


def kafka_quorum(kafka: KafkaAccess, timeout: float = 5.0) -> KafkaQuorum:
    """The KRaft controller quorum's leader and voters (see the module contract)."""
    return _ask_kafka(kafka, timeout, lambda: _with_client(kafka, timeout, _describe_quorum))


async def _under_replicated(admin: AIOKafkaAdminClient) -> int:
    topics = await admin.describe_topics()
    return sum(len(p["isr"]) < len(p["replicas"]) for topic in topics for p in topic["partitions"])


def under_replicated(kafka: KafkaAccess, timeout: float = 5.0) -> int:
    """How many partitions of all topics have fewer in-sync replicas than replicas."""
    return _ask_kafka(kafka, timeout, lambda: _with_admin(kafka, timeout, _under_replicated))


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


_QUIETING = threading.Lock()
_quieted: dict[str, tuple[int, int]] = {}  # logger name -> (probes in flight, level before)


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Silence a driver's connection warnings while probing a server that may be down.

    Counted, so that probes in parallel threads (a cluster's nodes) restore the level only
    when the last one ends, not while another still runs."""
    logger = logging.getLogger(logger_name)
    with _QUIETING:
        count, previous = _quieted.get(logger_name, (0, logger.level))
        _quieted[logger_name] = (count + 1, previous)
        logger.setLevel(logging.CRITICAL)
    try:
        yield None
    finally:
        with _QUIETING:
            count, previous = _quieted.pop(logger_name)
            if count > 1:
                _quieted[logger_name] = (count - 1, previous)
            else:
                logger.setLevel(previous)


@dataclass(frozen=True)
class CassandraView:
    """What one Cassandra node says: its release and data centre, and the peers it knows."""

    version: str
    datacenter: str | None
    peers: tuple[str, ...]


def cassandra_release_version(
    hosts: list[str],
    port: int,
    timeout: float = 10.0,
    login: CassandraLogin | None = None,
    tls: ClientTls | None = None,
) -> str | None:
    """Connect with cassandra-driver and read the server's release_version. With a `login`
    that the server refuses, None: it answers CQL, but its roles are not made yet."""
    view = cassandra_view(hosts, port, timeout, login, tls=tls)
    return None if view is None else view.version


def cassandra_view(
    hosts: list[str],
    port: int,
    timeout: float = 10.0,
    login: CassandraLogin | None = None,
    *,
    peers: bool = False,
    tls: ClientTls | None = None,
) -> CassandraView | None:
    """`system.local` (and with `peers`, `system.peers_v2`) of the first of `hosts` that
    answers, asked of those hosts only; None when the login is refused (as above)."""
    if not any(port_open(host, port, min(timeout, 2.0)) for host in hosts):
        raise ProbeError(f"Cassandra at {','.join(hosts)}:{port}: native port closed")
    # Imported here: the driver is heavy, and settings/CLI help must not pay for it.
    from cassandra import AuthenticationFailed, DriverException
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
    from cassandra.connection import ConnectionException
    from cassandra.policies import WhiteListRoundRobinPolicy

    # the hosts asked only: a cluster's node is probed alone, not through its peers
    policy = WhiteListRoundRobinPolicy(hosts)
    profile = ExecutionProfile(load_balancing_policy=policy, request_timeout=timeout)
    cluster = Cluster(
        contact_points=hosts,
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=timeout,
        control_connection_timeout=timeout,
        auth_provider=None if login is None else login.auth_provider(),
        ssl_context=None if tls is None else tls.context(),
    )
    try:
        with _quiet("cassandra"):
            session = cluster.connect()
            row = session.execute("SELECT release_version, data_center FROM system.local").one()
            known = session.execute("SELECT peer FROM system.peers_v2").all() if peers else []
    except NoHostAvailable as error:
        refused = error.errors and all(
            isinstance(e, AuthenticationFailed) for e in error.errors.values()
        )
        if login is not None and refused:
            return None
        raise ProbeError(f"Cassandra at {','.join(hosts)}:{port}: {error}") from error
    except (DriverException, ConnectionException, OSError) as error:
        # what a server that is down, booting or overloaded causes; anything else is a bug
        raise ProbeError(f"Cassandra at {','.join(hosts)}:{port}: {error}") from error
    finally:
        cluster.shutdown()
    if row is None:
        raise ProbeError("system.local is empty")
    return CassandraView(
        str(row.release_version), row.data_center, tuple(sorted(str(r.peer) for r in known))
    )
