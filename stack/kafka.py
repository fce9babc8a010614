"""A single-node Apache Kafka (KRaft, combined broker + controller) as a child JVM.

Contract: `KafkaServer(settings)` keeps everything under `<data dir>/kafka/`:
`server.properties`, `log4j2.xml`, `data/` (log.dirs, which also holds the KRaft metadata log),
`logs/server.log` (the broker's INFO log), `logs/kafka.out` (JVM stdout/stderr), `kafka.pid`.
The storage is formatted once with `kafka.tools.StorageTool` from the same jars as the broker;
the broker runs `kafka.Kafka server.properties` and is ready when a Metadata request is answered.

Choices (say why, since tests and the Faust app depend on them):
- Static quorum (`controller.quorum.voters`), so formatting needs no `--standalone`.
- Replication factor 1 and min ISR 1 for every internal topic: there is one broker.
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
from pathlib import Path

from stack.errors import StackError
from stack.health import ProbeError, kafka_metadata
from stack.jars import classpath_arg
from stack.security import kafka_properties, scram_format_arguments
from stack.server import JvmServer

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


class KafkaServer(JvmServer):
    """Apache Kafka (version pinned in stack/maven/kafka.pom.xml), one KRaft node."""

    name = "kafka"
    stop_timeout = 60.0

    @property
    def bootstrap(self) -> str:
        return f"{self.settings.host}:{self.settings.kafka_port}"

    @property
    def address(self) -> str:
        return self.bootstrap

    @property
    def ports(self) -> dict[str, int]:
        return {
            "broker": self.settings.kafka_port,
            "controller": self.settings.kafka_controller_port,
        }

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
        port, controller = self.settings.kafka_port, self.settings.kafka_controller_port
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{host}:{controller}",
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
        } | (kafka_properties(host, port, controller) if self.settings.security == "on" else {})

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
                    f"kafka: {self.log_dir} was formatted with security {formatted}, and this "
                    f"stack runs with security {security}: use another KJ_STACK_DIR or wipe it"
                )
            return
        self.progress(f"kafka: formatting KRaft storage in {self.log_dir} (once)")
        scram = scram_format_arguments() if security == "on" else []
        command = [
            java, f"-Dlog4j2.configurationFile={self.home / 'log4j2.xml'}",
            "-cp", classpath_arg(jars), "kafka.tools.StorageTool",
            "format", "-t", new_cluster_id(), "-c", str(self.properties_file), "--ignore-formatted",
            *scram,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            for argument in scram:  # the passwords are in the arguments it may echo
                output = output.replace(argument, "--add-scram ***")
            raise StackError(f"kafka storage format failed:\n{output}")
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
        metadata = kafka_metadata(self.settings.kafka_access, timeout)
        if not any(b.port == self.settings.kafka_port for b in metadata.brokers):
            raise ProbeError(f"the broker at {self.bootstrap} advertises {metadata.brokers}")
        return None
