"""A single-node Apache Cassandra 5.0 as a child JVM.

Contract: `CassandraServer(settings)` keeps everything under `<data dir>/cassandra/`:
`cassandra.yaml`, `logback.xml`, `data/` (`cassandra.storagedir`: data, commitlog, hints,
saved_caches), `triggers/`, `logs/system.log` (INFO), `logs/cassandra.out` (JVM
stdout/stderr), `cassandra.pid`. It runs `org.apache.cassandra.service.CassandraDaemon` on
Java 17 with the JPMS flags of Cassandra's `conf/jvm17-server.options`, and is ready when
cassandra-driver connects and reads `system.local`.

Tuning for a fast, small, single test node (and why):
- `num_tokens: 1` with `-Dcassandra.initial_token=0`: one token, no token allocation work.
- `-Dcassandra.skip_wait_for_gossip_to_settle=0`: there are no peers to wait for.
- `auto_snapshot: false`: tests drop and truncate tables all the time; snapshots would pile up.
- memtables 64 MiB on/off heap and 8 MiB commitlog segments: a 1 GiB heap and little disk.
- JMX: no port unless KJ_CASSANDRA_JMX_PORT is set (nothing here uses nodetool).
- `-XX:+ExitOnOutOfMemoryError`: Cassandra's advice; a half-dead node is worse than none.
"""

from __future__ import annotations

from pathlib import Path

from stack.health import cassandra_release_version
from stack.jars import classpath_arg
from stack.security import CASSANDRA_YAML
from stack.server import JvmServer

# From apache/cassandra conf/jvm17-server.options: its "JPMS" and "Netty" sections (the GC
# section is replaced by the few flags in `_command`). Without them Cassandra fails on
# reflective access at start or under load. The last --add-opens (java.nio) is in the newest
# stored version of that file but not in an older one; which of them the cassandra-5.0 branch
# carries could not be told apart, and opening one more package costs nothing.
JVM17_OPTIONS = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
)  # fmt: skip

_LOGBACK = """<!-- Written by stack/cassandra.py on every start; edits are overwritten. -->
<configuration scan="false">
  <appender name="SYSTEMLOG" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>{log}</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>{log}.%i</fileNamePattern>
      <minIndex>1</minIndex>
      <maxIndex>3</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy">
      <maxFileSize>50MB</maxFileSize>
    </triggeringPolicy>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="SYSTEMLOG"/></root>
</configuration>
"""


class CassandraServer(JvmServer):
    """Apache Cassandra (version pinned in stack/maven/cassandra.pom.xml), one node."""

    name = "cassandra"
    accepted_java = (17,)  # 5.0 also runs on 11, but Kafka needs 17: one Java for both
    stop_timeout = 60.0

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.settings.cassandra_port}"

    @property
    def ports(self) -> dict[str, int]:
        ports = {
            "native": self.settings.cassandra_port,
            "storage": self.settings.cassandra_storage_port,
        }
        if self.settings.cassandra_jmx_port is not None:
            ports["jmx"] = self.settings.cassandra_jmx_port
        return ports

    @property
    def server_log(self) -> Path:
        return self.home / "logs" / "system.log"

    @property
    def config_file(self) -> Path:
        return self.home / "cassandra.yaml"

    def cassandra_yaml(self) -> str:
        """The config, with Cassandra 5.0 key names (durations and sizes carry units)."""
        host, storage = self.settings.host, self.settings.cassandra_storage_port
        return f"""\
# Written by stack/cassandra.py on every start; edits are overwritten.
cluster_name: kafka-journal
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{host}:{storage}"
listen_address: {host}
rpc_address: {host}
storage_port: {storage}
native_transport_port: {self.settings.cassandra_port}
start_native_transport: true
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
memtable_heap_space: 64MiB
memtable_offheap_space: 64MiB
auto_snapshot: false
""" + (CASSANDRA_YAML if self.settings.security == "on" else "")

    def _configure(self) -> None:
        self.config_file.write_text(self.cassandra_yaml(), encoding="utf-8")
        (self.home / "logback.xml").write_text(
            _LOGBACK.format(log=self.server_log), encoding="utf-8"
        )
        (self.home / "data").mkdir(exist_ok=True)
        # Cassandra warns every minute when its triggers directory is missing.
        (self.home / "triggers").mkdir(exist_ok=True)

    def _command(self, java: str, jars: list[Path]) -> list[str]:
        del java
        settings = self.settings
        jmx = (
            [f"-Dcassandra.jmx.local.port={settings.cassandra_jmx_port}"]
            if settings.cassandra_jmx_port is not None
            else []
        )
        return [
            f"-Xms{settings.cassandra_heap_min}", f"-Xmx{settings.cassandra_heap_max}",
            "-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled", "-XX:MaxGCPauseMillis=300",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.net.preferIPv4Stack=true",
            *JVM17_OPTIONS,
            "-Dcassandra-foreground=yes",
            f"-Dcassandra.config={self.config_file.as_uri()}",
            f"-Dcassandra.storagedir={self.home / 'data'}",
            f"-Dcassandra.triggers_dir={self.home / 'triggers'}",
            f"-Dcassandra.logdir={self.home / 'logs'}",
            f"-Dlogback.configurationFile={self.home / 'logback.xml'}",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra.initial_token=0",
            # with PasswordAuthenticator: the default superuser at once, not after 10 s
            "-Dcassandra.superuser_setup_delay_ms=0",
            *jmx,
            "-cp", classpath_arg(jars), "org.apache.cassandra.service.CassandraDaemon",
        ]  # fmt: skip

    def _probe(self, timeout: float) -> str | None:
        return cassandra_release_version(
            [self.settings.host],
            self.settings.cassandra_port,
            timeout,
            self.settings.cassandra_login,
        )
