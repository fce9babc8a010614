"""Real readiness probes: a server is healthy only when it answers its own protocol.

Contract:
- `kafka_metadata(bootstrap, timeout)` speaks the Kafka wire protocol over a plain socket:
  an ApiVersions (v0) request, then a Metadata (v4) request for no topics. It returns the
  cluster id and the brokers the cluster advertises, or raises `ProbeError`. A listening port is
  not enough: a KRaft broker answers Metadata only once it has joined the quorum and caught up.
  It needs no event loop, so it works from sync code, threads and running loops alike.
- `cassandra_release_version(hosts, port, timeout)` opens a real cassandra-driver session and
  reads `release_version` from `system.local`, or raises `ProbeError`. A plain TCP connect goes
  first, so polling a server that is still booting costs no driver set-up and logs no warnings.
Both are blocking and bounded by `timeout` (roughly; the driver adds its own small overheads).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

_API_METADATA = 3
_API_VERSIONS = 18
_METADATA_VERSION = 4  # the oldest Metadata version Kafka 4.x still serves (KIP-896)


class ProbeError(Exception):
    """The server did not answer its protocol (yet)."""


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


class _Reader:
    """Big-endian primitives of the (non-flexible) Kafka protocol."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def _take(self, size: int) -> bytes:
        if self._at + size > len(self._data):
            raise ProbeError("truncated Kafka response")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def int16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def nullable_string(self) -> str | None:
        size = self.int16()
        return None if size < 0 else self._take(size).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise ProbeError("unexpected null string in Kafka response")
        return value


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"kafka-journal-stack"
    # Request header v1: api_key, api_version, correlation_id, client_id (nullable string).
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    message = header + body
    return struct.pack(">i", len(message)) + message


def _receive(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ProbeError("Kafka closed the connection")
        chunks.extend(chunk)
    return bytes(chunks)


def _exchange(
    sock: socket.socket, api_key: int, version: int, correlation_id: int, body: bytes
) -> _Reader:
    sock.sendall(_request(api_key, version, correlation_id, body))
    (size,) = struct.unpack(">i", _receive(sock, 4))
    reader = _Reader(_receive(sock, size))
    if reader.int32() != correlation_id:  # response header v0: the correlation id only
        raise ProbeError("Kafka answered another request")
    return reader


def _parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port)


def kafka_metadata(bootstrap: str, timeout: float = 5.0) -> KafkaMetadata:
    """Ask the first bootstrap server for cluster metadata (see the module contract)."""
    host, port = _parse_bootstrap(bootstrap)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            versions = _exchange(sock, _API_VERSIONS, 0, 1, b"")
            error = versions.int16()
            if error != 0:
                raise ProbeError(f"ApiVersions error code {error}")
            ranges = {}
            for _ in range(versions.int32()):
                key, low, high = versions.int16(), versions.int16(), versions.int16()
                ranges[key] = (low, high)
            low, high = ranges.get(_API_METADATA, (1, 0))
            if not low <= _METADATA_VERSION <= high:
                raise ProbeError(
                    f"broker serves Metadata v{low}..v{high}, not v{_METADATA_VERSION}"
                )
            # Metadata v4 body: topics (empty array: none), allow_auto_topic_creation=false.
            metadata = _exchange(
                sock, _API_METADATA, _METADATA_VERSION, 2, struct.pack(">ib", 0, 0)
            )
            metadata.int32()  # throttle_time_ms
            brokers = []
            for _ in range(metadata.int32()):
                node_id, broker_host, broker_port = (
                    metadata.int32(),
                    metadata.string(),
                    metadata.int32(),
                )
                metadata.nullable_string()  # rack
                brokers.append(KafkaBroker(node_id, broker_host, broker_port))
            cluster_id = metadata.nullable_string()
            controller_id = metadata.int32()
    except OSError as error:
        raise ProbeError(f"Kafka at {host}:{port}: {error}") from error
    if not brokers:
        raise ProbeError(f"Kafka at {host}:{port} lists no brokers yet")
    return KafkaMetadata(cluster_id, controller_id, tuple(brokers))


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _quiet_driver() -> Iterator[None]:
    """Silence the driver's connection warnings while probing a server that may be down."""
    logger = logging.getLogger("cassandra")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield None
    finally:
        logger.setLevel(previous)


def cassandra_release_version(hosts: list[str], port: int, timeout: float = 10.0) -> str:
    """Connect with cassandra-driver and read the server's release_version."""
    if not any(port_open(host, port, min(timeout, 2.0)) for host in hosts):
        raise ProbeError(f"Cassandra at {','.join(hosts)}:{port}: native port closed")
    # Imported here: the driver is heavy, and settings/CLI help must not pay for it.
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=timeout)
    cluster = Cluster(
        contact_points=hosts,
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=timeout,
        control_connection_timeout=timeout,
    )
    try:
        with _quiet_driver():
            session = cluster.connect()
            row = session.execute("SELECT release_version FROM system.local").one()
    except Exception as error:  # the driver raises many types; any of them means "not ready"
        raise ProbeError(f"Cassandra at {','.join(hosts)}:{port}: {error}") from error
    finally:
        cluster.shutdown()
    if row is None:
        raise ProbeError("system.local is empty")
    return str(row.release_version)
