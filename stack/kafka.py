"""Apache Kafka in KRaft mode as child JVMs: one node, or a cluster of three (KJ_KAFKA_BROKERS).

Contract: `KafkaServer(settings, node)` is one node (combined broker + controller) and keeps
everything under `<data dir>/kafka/` (one node) or `<data dir>/kafka-<id>/` (a cluster's):
`server.properties`, `log4j2.xml`, `data/` (log.dirs, which also holds the KRaft metadata log),
`logs/server.log` (the broker's INFO log), `logs/kafka.out` (JVM stdout/stderr), `kafka.pid`.
The storage is formatted once with `kafka.tools.StorageTool` from the same jars as the broker;
the node runs `kafka.Kafka server.properties` and is ready when it answers a Metadata request
that lists it. `KafkaCluster(settings)` is the three nodes as one `Server`: started together
(a node is ready only once a majority of the quorum runs), formatted with one cluster id,
stopped together; `nodes` are the single nodes, for fault tests that kill one.

Choices (say why, since tests and the Faust app depend on them):
- Static quorum (`controller.quorum.voters`, every node a voter), so formatting needs no
  `--standalone` or `--initial-controllers`.
- One node: replication factor 1 and min ISR 1 for every internal topic. Three nodes:
  replication factor 3 and min ISR 2 for internal topics and as the topics' defaults, and no
  unclean leader election, so an acknowledged record (acks=all) survives one node's loss.
- `group.initial.rebalance.delay.ms=0`: the first consumer of a group gets its partitions at once.
- `offsets.topic.num.partitions=10` (default 50): the first group join creates __consumer_offsets,
  and 50 partitions on a 2-core machine delay it for seconds; 10 keeps groups spread.
- `auto.create.topics.enable=true` (Kafka's default, kept explicit): the journal and Faust
  create their topics with admin calls anyway; auto-creation only helps ad-hoc tools.
- Logging: Kafka 4.x logs via SLF4J 1.7 into Log4j 2 (log4j-slf4j-impl in the pom), so the
  config is a log4j2.xml, not a log4j.properties.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from stack.errors import StackError
from stack.health import (
    STATUS_PROBE_S,
    ProbeError,
    kafka_metadata,
    kafka_quorum,
    under_replicated,
)
from stack.jars import classpath_arg
from stack.progress import Progress, print_progress
from stack.security import kafka_properties, scram_format_arguments
from stack.server import JvmServer, NodeCluster, ServerStatus
from stack.settings import KafkaNode, StackSettings
from stack.tls import StackCertificates

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by stack/kafka.py on every start; edits are overwritten. -->
<Configuration status="WARN">
  <Appenders>
    <RollingFile name="server" fileName="{log}" filePattern="{log}.%i">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <Policies><SizeBasedTriggeringPolicy size="50 MB"/></Policies>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
    <!-- one line per request at INFO would drown everything else -->
    <Logger name="kafka.request.logger" level="WARN"/>
  </Loggers>
</Configuration>
"""


def new_cluster_id() -> str:
    """A cluster id as `StorageTool random-uuid` makes one, without paying for a JVM start.

    Kafka's Uuid is 16 random bytes in URL-safe base64 without padding; Kafka rejects ids that
    start with "-" (they look like options), so draw again in that case.
    """
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _cluster_id(meta_properties: Path) -> str | None:
    """The `cluster.id` a formatted node's meta.properties holds, or None if not formatted."""
    try:
        lines = meta_properties.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    ids = [line.partition("=")[2].strip() for line in lines if line.startswith("cluster.id=")]
    return ids[0] if ids else None


class KafkaServer(JvmServer):
    """Apache Kafka (version pinned in stack/maven/kafka.pom.xml), one KRaft node."""

    name = "kafka"
    stop_timeout = 60.0

    def __init__(
        self,
        settings: StackSettings,
        node: KafkaNode | None = None,
        *,
        progress: Progress = print_progress,
        tie_to_parent: bool = False,
    ) -> None:
        super().__init__(settings, progress=progress, tie_to_parent=tie_to_parent)
        self.node = settings.kafka_nodes[0] if node is None else node
        # what a first format writes; a cluster sets its nodes' one id before preparing them
        self.cluster_id: str | None = None

    @property
    def label(self) -> str:
        return self.name if self.settings.kafka_brokers == 1 else f"kafka-{self.node.node_id}"

    @property
    def bootstrap(self) -> str:
        return f"{self.settings.host}:{self.node.port}"

    @property
    def address(self) -> str:
        return self.bootstrap

    @property
    def ports(self) -> dict[str, int]:
        mtls = {"mtls": self.node.mtls_port} if self.settings.tls == "on" else {}
        return {"broker": self.node.port, "controller": self.node.controller_port} | mtls

    @property
    def formatted_cluster_id(self) -> str | None:
        """The cluster id this node's storage was formatted with, None before its format."""
        return _cluster_id(self.log_dir / "meta.properties")

    @property
    def server_log(self) -> Path:
        return self.home / "logs" / "server.log"

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_dir(self) -> Path:
        return self.home / "data"

    def server_properties(self) -> dict[str, str]:
        host = self.settings.host
        port, controller = self.node.port, self.node.controller_port
        return (
            {
                "process.roles": "broker,controller",
                "node.id": str(self.node.node_id),
                "controller.quorum.voters": self.settings.kafka_quorum_voters,
                "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller}",
                "advertised.listeners": f"PLAINTEXT://{host}:{port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "log.dirs": str(self.log_dir),
                "offsets.topic.replication.factor": "1",
                "offsets.topic.num.partitions": "10",
                "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1",
                "share.coordinator.state.topic.replication.factor": "1",
                "share.coordinator.state.topic.min.isr": "1",
                "group.initial.rebalance.delay.ms": "0",
                "auto.create.topics.enable": "true",
            }
            | self._replication_properties()
            | (
                kafka_properties(host, port, controller, self._certificates, self.node.mtls_port)
                if self.settings.security == "on"
                else {}
            )
        )

    @property
    def _certificates(self) -> StackCertificates | None:
        return StackCertificates(self.settings.tls_dir) if self.settings.tls == "on" else None

    def _replication_properties(self) -> dict[str, str]:
        """A cluster's: every topic (internal ones too) on all three nodes, and writes with
        acks=all need two of them. One node: nothing more than above."""
        if self.settings.kafka_brokers == 1:
            return {}
        replicas, min_isr = str(self.settings.kafka_brokers), "2"
        return {
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "unclean.leader.election.enable": "false",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
        }

    @property
    def _security_marker(self) -> Path:
        return self.home / "security"

    def _configure(self) -> None:
        lines = ["# Written by stack/kafka.py on every start; edits are overwritten."]
        lines += [f"{key}={value}" for key, value in self.server_properties().items()]
        self.properties_file.touch(mode=0o600)  # it holds the admin's password when secured
        self.properties_file.chmod(0o600)
        self.properties_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        (self.home / "log4j2.xml").write_text(_LOG4J2.format(log=self.server_log), encoding="utf-8")

    def _prepare_storage(self, java: str, jars: list[Path]) -> None:
        security = self.settings.security
        if (self.log_dir / "meta.properties").is_file():
            formatted = (
                self._security_marker.read_text().strip()
                if self._security_marker.is_file()
                else "off"
            )
            if formatted != security:
                # SCRAM users exist only if created at format time: a mismatch cannot work
                raise StackError(
                    f"{self.label}: {self.log_dir} was formatted with security {formatted}, and "
                    f"this stack runs with security {security}: use another KJ_STACK_DIR or wipe it"
                )
            return
        self.progress(f"{self.label}: formatting KRaft storage in {self.log_dir} (once)")
        cluster_id = new_cluster_id() if self.cluster_id is None else self.cluster_id
        scram = scram_format_arguments() if security == "on" else []
        command = [
            java, f"-Dlog4j2.configurationFile={self.home / 'log4j2.xml'}",
            "-cp", classpath_arg(jars), "kafka.tools.StorageTool",
            "format", "-t", cluster_id, "-c", str(self.properties_file), "--ignore-formatted",
            *scram,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            for argument in scram:  # the passwords are in the arguments it may echo
                output = output.replace(argument, "--add-scram ***")
            raise StackError(f"{self.label} storage format failed:\n{output}")
        self._security_marker.write_text(security + "\n", encoding="utf-8")

    def _command(self, java: str, jars: list[Path]) -> list[str]:
        del java
        return [
            f"-Xmx{self.settings.kafka_heap}",
            # Kafka's own launcher defaults (kafka-run-class.sh): G1 with short pauses.
            "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
            # A broker out of heap is better dead (and visible) than limping.
            "-XX:+ExitOnOutOfMemoryError",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.xml'}",
            f"-Dkafka.logs.dir={self.home / 'logs'}",
            "-cp", classpath_arg(jars), "kafka.Kafka", str(self.properties_file),
        ]  # fmt: skip

    def _probe(self, timeout: float) -> str | None:
        metadata = kafka_metadata(self.settings.kafka_access_at(self.bootstrap), timeout)
        if not any(b.port == self.node.port for b in metadata.brokers):
            raise ProbeError(f"the broker at {self.bootstrap} advertises {metadata.brokers}")
        return None


class KafkaCluster(NodeCluster[KafkaServer]):
    """The local Kafka as KJ_KAFKA_BROKERS KRaft nodes, one `Server` (module contract)."""

    name = "kafka"

    def _nodes(self) -> tuple[KafkaServer, ...]:
        return tuple(
            KafkaServer(
                self.settings, node, progress=self.progress, tie_to_parent=self.tie_to_parent
            )
            for node in self.settings.kafka_nodes
        )

    @property
    def address(self) -> str:
        return self.settings.kafka_bootstrap

    def _before_launch(self, launch: Sequence[KafkaServer]) -> None:
        """The nodes to launch get the cluster's id: the one already formatted, or a new one
        (a first format of all of them)."""
        formatted = {node.formatted_cluster_id for node in self.nodes} - {None}
        if len(formatted) > 1:
            raise StackError(f"kafka: the nodes' storage belongs to clusters {formatted}")
        cluster_id = formatted.pop() if formatted else new_cluster_id()
        for node in launch:
            node.cluster_id = cluster_id

    def _facts(self, nodes: tuple[ServerStatus, ...]) -> list[tuple[str, str]]:
        facts = [("quorum", "unknown: no node answers")]
        if any(status.healthy for status in nodes):
            access = self.settings.kafka_access
            try:
                quorum = kafka_quorum(access, STATUS_PROBE_S)
                voters = ", ".join(map(str, quorum.voters))
                facts = [("quorum", f"leader {quorum.leader_id}, voters {voters}")]
                count = under_replicated(access, STATUS_PROBE_S)
                facts.append(("replicas", f"{count} partition(s) under-replicated"))
            except ProbeError as error:
                facts = [("quorum", f"unknown: {error}")]
        return facts
