"""The stack's servers as Docker containers (testcontainers), where a Docker engine exists.

Contract:
- `docker_available()` pings the engine (DOCKER_HOST or /var/run/docker.sock) with a raw
  `GET /_ping`, bounded by a short timeout; it never raises and never imports docker libraries.
- `docker_servers(settings)` returns a Kafka and a Cassandra `Server` backed by containers of
  the same versions as the jars (images `apache/kafka:<kafka.version>` and
  `cassandra:<cassandra.version>`, versions read from the poms). Host ports are the settings'
  fixed ports, so clients and the Kafka advertised listener see the same addresses as with the
  local stack. Containers have fixed names (`kafka-journal-kafka`, `kafka-journal-cassandra`):
  a later `up` restarts the existing container and keeps its data, like the local stack does.
- `stop` is `docker stop` (SIGTERM, then SIGKILL), `kill9` is `docker kill`; readiness uses the
  same protocol probes as the local servers.
- With `tie_to_parent=True` the testcontainers reaper (Ryuk) removes the containers when this
  process ends; without it (the CLI) Ryuk is disabled so `stack up` outlives the command.
Used only when KJ_STACK=docker. Not exercised on machines without Docker.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from kjconfig.access import KafkaAccess
from stack.errors import StackError
from stack.health import (
    STATUS_PROBE_S,
    ProbeError,
    answers,
    cassandra_release_version,
    kafka_metadata,
    until_answered,
)
from stack.jars import pom_version
from stack.progress import Progress, print_progress
from stack.server import Server, ServerStatus
from stack.settings import StackSettings


def docker_available(timeout: float = 0.5) -> bool:
    """True if a Docker engine answers `/_ping` within `timeout` seconds."""
    url = urlparse(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
    try:
        if url.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(url.path)
        elif url.scheme in ("tcp", "http") and url.hostname:
            sock = socket.create_connection((url.hostname, url.port or 2375), timeout=timeout)
        else:
            return False  # TLS and ssh engines: let testcontainers decide, not a quick ping
        with sock:
            sock.settimeout(timeout)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            answer = sock.recv(1024)
    except OSError:
        return False
    return answer.startswith(b"HTTP/") and b" 200 " in answer.split(b"\r\n", 1)[0]


class ContainerServer:
    """One server in a named container (see the module contract)."""

    controllable = True

    def __init__(
        self,
        name: str,
        image: str,
        address: str,
        ports: dict[str, int],
        bindings: dict[int, int],
        configure: Callable[[Any], Any],
        probe: Callable[[float], str | None],
        *,
        settings: StackSettings,
        progress: Progress = print_progress,
        tie_to_parent: bool = False,
    ) -> None:
        self._name = name
        self.image = image
        self.address = address
        self.ports = ports
        self.bindings = bindings  # container port -> host port
        self._configure = configure
        self._probe = probe
        self.settings = settings
        self.progress = progress
        self.tie_to_parent = tie_to_parent
        self.container_name = f"kafka-journal-{name}"

    @property
    def name(self) -> str:
        return self._name

    def _existing(self) -> Any | None:
        import docker  # type: ignore[import-untyped]
        import docker.errors  # type: ignore[import-untyped]

        client = docker.from_env()
        try:
            return client.containers.get(self.container_name)
        except docker.errors.NotFound:
            return None

    def start(self, timeout: float | None = None) -> bool:
        if self.healthy():
            return False
        existing = self._existing()
        if existing is not None:
            self.progress(f"{self._name}: starting existing container {self.container_name}")
            existing.start()
        else:
            from testcontainers.core.config import testcontainers_config
            from testcontainers.core.container import DockerContainer

            testcontainers_config.ryuk_disabled = not self.tie_to_parent
            self.progress(
                f"{self._name}: creating container {self.container_name} from {self.image}"
            )
            container = DockerContainer(self.image).with_name(self.container_name)
            for inside, outside in self.bindings.items():
                container = container.with_bind_ports(inside, outside)
            self._configure(container).start()
        self._wait_ready(self.settings.start_timeout if timeout is None else timeout)
        return True

    def _wait_ready(self, timeout: float) -> None:
        try:
            until_answered(lambda: self._probe(5.0), timeout)
        except ProbeError as error:
            raise StackError(f"{self._name} container not ready: {error}") from error
        self.progress(f"{self._name}: ready at {self.address}")

    def stop(self, timeout: float | None = None) -> None:
        existing = self._existing()
        if existing is not None:
            existing.stop(timeout=int(60 if timeout is None else timeout))
            self.progress(f"{self._name}: container stopped")

    def restart(self, timeout: float | None = None) -> None:
        self.stop()
        self.start(timeout)

    def kill9(self) -> None:
        existing = self._existing()
        if existing is not None:
            existing.kill(signal="SIGKILL")
            self.progress(f"{self._name}: container killed")

    def pid(self) -> int | None:
        existing = self._existing()
        if existing is None:
            return None
        pid = existing.attrs.get("State", {}).get("Pid")
        return int(pid) if pid else None

    def healthy(self) -> bool:
        return answers(self._probe)

    def status(self) -> ServerStatus:
        try:
            self._probe(STATUS_PROBE_S)
            healthy, detail = True, None
        except ProbeError as error:
            healthy, detail = False, str(error)
        return ServerStatus(
            self._name, "docker", self.address, healthy, ports=self.ports, pid=self.pid(),
            version=self.image.rpartition(":")[2], detail=detail,
        )  # fmt: skip


def _kafka_env(settings: StackSettings) -> dict[str, str]:
    """The apache/kafka image reads its server.properties from KAFKA_* variables."""
    port, controller = settings.kafka_port, settings.kafka_controller_port
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:{controller}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{settings.host}:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@localhost:{controller}",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "10",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_HEAP_OPTS": f"-Xmx{settings.kafka_heap}",
    }


def _cassandra_env(settings: StackSettings) -> dict[str, str]:
    return {
        "CASSANDRA_CLUSTER_NAME": "kafka-journal",
        "CASSANDRA_NUM_TOKENS": "1",
        "MAX_HEAP_SIZE": settings.cassandra_heap,
        "HEAP_NEWSIZE": "128m",
        "JVM_EXTRA_OPTS": (
            "-Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.initial_token=0"
        ),
    }


def docker_servers(
    settings: StackSettings, *, progress: Progress = print_progress, tie_to_parent: bool = False
) -> tuple[Server, Server]:
    """Kafka and Cassandra containers; raises StackError when no engine answers."""
    if not docker_available():
        raise StackError(
            "KJ_STACK=docker, but no Docker engine answers (DOCKER_HOST or /var/run/docker.sock)"
        )
    bootstrap = f"{settings.host}:{settings.kafka_port}"

    def kafka_probe(timeout: float) -> str | None:
        kafka_metadata(KafkaAccess(bootstrap), timeout)
        return None

    def cassandra_probe(timeout: float) -> str | None:
        return cassandra_release_version([settings.host], settings.cassandra_port, timeout)

    kafka = ContainerServer(
        "kafka", f"apache/kafka:{pom_version('kafka')}", bootstrap,
        {"broker": settings.kafka_port}, {settings.kafka_port: settings.kafka_port},
        lambda container: container.with_envs(**_kafka_env(settings)),
        kafka_probe, settings=settings, progress=progress, tie_to_parent=tie_to_parent,
    )  # fmt: skip
    cassandra = ContainerServer(
        "cassandra", f"cassandra:{pom_version('cassandra')}",
        f"{settings.host}:{settings.cassandra_port}",
        {"native": settings.cassandra_port}, {9042: settings.cassandra_port},
        lambda container: container.with_envs(**_cassandra_env(settings)),
        cassandra_probe, settings=settings, progress=progress, tie_to_parent=tie_to_parent,
    )  # fmt: skip
    return kafka, cassandra
