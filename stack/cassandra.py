"""Apache Cassandra 5.0 as child JVMs: one node, or a cluster of three (KJ_CASSANDRA_NODES).

Contract: `CassandraServer(settings, node)` is one node and keeps everything under
`<data dir>/cassandra/` (one node) or `<data dir>/cassandra-<id>/` (a cluster's):
`cassandra.yaml`, `logback.xml`, `data/` (`cassandra.storagedir`: data, commitlog, hints,
saved_caches), `triggers/`, `logs/system.log` (INFO), `logs/cassandra.out` (JVM
stdout/stderr), `cassandra.pid`. It runs `org.apache.cassandra.service.CassandraDaemon` on
Java 17 with the JPMS flags of Cassandra's `conf/jvm17-server.options`, and is ready when
cassandra-driver connects and reads `system.local` (a cluster's node: and knows its two
peers, `system.peers_v2`). `CassandraCluster(settings)` is the three nodes as one `Server`,
started and stopped together; `nodes` are the single nodes, for fault tests that kill one.

Tuning for a fast, small, single test node (and why):
- `num_tokens: 1` with `-Dcassandra.initial_token=0`: one token, no token allocation work.
- `-Dcassandra.skip_wait_for_gossip_to_settle=0`: there are no peers to wait for.
- `auto_snapshot: false`: tests drop and truncate tables all the time; snapshots would pile up.
- memtables 64 MiB on/off heap and 8 MiB commitlog segments: a 1 GiB heap and little disk.
- JMX: no port unless KJ_CASSANDRA_JMX_PORT is set (nothing here uses nodetool).
- `-XX:+ExitOnOutOfMemoryError`: Cassandra's advice; a half-dead node is worse than none.

Three nodes (and why):
- node i on its own loopback address (127.0.0.1, .2, .3), every node on the same ports: the
  driver and Cassandra's own tools expect one native port per cluster.
- every node a seed and `auto_bootstrap: false`: a seed does not bootstrap, so the three start
  at once (a bootstrapping node waits 30 s of ring delay, and two may not bootstrap together),
  which is safe only because a new cluster has no data to stream.
- one token each (`num_tokens: 1`), the middles of the ring's thirds: equal shares, no token
  allocation work.
- `GossipingPropertyFileSnitch` with a `cassandra-rackdc.properties` per node: its data centre
  (datacenter1, or datacenter2 for node 2 with KJ_CASSANDRA_DATACENTERS=2) and rack.
- the heap 768m each unless KJ_CASSANDRA_HEAP_MAX says otherwise (`StackSettings.cassandra_heap`).
"""

from __future__ import annotations

from pathlib import Path

from stack.errors import StackError
from stack.health import STATUS_PROBE_S, ProbeError, cassandra_view
from stack.jars import classpath_arg
from stack.progress import Progress, print_progress
from stack.security import CASSANDRA_YAML, cassandra_tls_yaml
from stack.server import JvmServer, NodeCluster, ServerStatus
from stack.settings import CassandraNode, StackSettings
from stack.tls import StackCertificates

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

    def __init__(
        self,
        settings: StackSettings,
        node: CassandraNode | None = None,
        *,
        progress: Progress = print_progress,
        tie_to_parent: bool = False,
    ) -> None:
        super().__init__(settings, progress=progress, tie_to_parent=tie_to_parent)
        self.node = settings.cassandra_node_list[0] if node is None else node

    @property
    def clustered(self) -> bool:
        return self.settings.cassandra_nodes > 1

    @property
    def label(self) -> str:
        return f"cassandra-{self.node.node_id}" if self.clustered else self.name

    @property
    def address(self) -> str:
        return f"{self.node.host}:{self.settings.cassandra_port}"

    @property
    def jmx_port(self) -> int | None:
        """JMX listens on localhost whatever the node's address: one port per node."""
        base = self.settings.cassandra_jmx_port
        return None if base is None else base + self.node.node_id - 1

    @property
    def ports(self) -> dict[str, int]:
        ports = {
            "native": self.settings.cassandra_port,
            "storage": self.settings.cassandra_storage_port,
        }
        if self.jmx_port is not None:
            ports["jmx"] = self.jmx_port
        return ports

    @property
    def server_log(self) -> Path:
        return self.home / "logs" / "system.log"

    @property
    def config_file(self) -> Path:
        return self.home / "cassandra.yaml"

    @property
    def rackdc_file(self) -> Path:
        return self.home / "cassandra-rackdc.properties"

    def cassandra_yaml(self) -> str:
        """The config, with Cassandra 5.0 key names (durations and sizes carry units)."""
        host, storage = self.node.host, self.settings.cassandra_storage_port
        seeds = ",".join(f"{n.host}:{storage}" for n in self.settings.cassandra_node_list)
        snitch = "GossipingPropertyFileSnitch" if self.clustered else "SimpleSnitch"
        cluster = "auto_bootstrap: false\n" if self.clustered else ""
        return (
            f"""\
# Written by stack/cassandra.py on every start; edits are overwritten.
cluster_name: kafka-journal
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: {snitch}
{cluster}seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seeds}"
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
"""
            + (CASSANDRA_YAML if self.settings.security == "on" else "")
            + (
                cassandra_tls_yaml(StackCertificates(self.settings.tls_dir))
                if self.settings.tls == "on"
                else ""
            )
        )

    def _configure(self) -> None:
        self.config_file.write_text(self.cassandra_yaml(), encoding="utf-8")
        (self.home / "logback.xml").write_text(
            _LOGBACK.format(log=self.server_log), encoding="utf-8"
        )
        (self.home / "data").mkdir(exist_ok=True)
        if self.clustered:
            self.rackdc_file.write_text(
                "# Written by stack/cassandra.py on every start; edits are overwritten.\n"
                f"dc={self.node.datacenter}\nrack={self.node.rack}\n",
                encoding="utf-8",
            )
        # Cassandra warns every minute when its triggers directory is missing.
        (self.home / "triggers").mkdir(exist_ok=True)

    def _command(self, java: str, jars: list[Path]) -> list[str]:
        del java
        settings = self.settings
        jmx = [f"-Dcassandra.jmx.local.port={self.jmx_port}"] if self.jmx_port is not None else []
        rackdc = (
            [f"-Dcassandra-rackdc.properties={self.rackdc_file.as_uri()}"] if self.clustered else []
        )
        return [
            f"-Xms{settings.cassandra_heap_min}", f"-Xmx{settings.cassandra_heap}",
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
            f"-Dcassandra.initial_token={self.node.token}",  # read at the first start only
            *rackdc,
            # with PasswordAuthenticator: the default superuser at once, not after 10 s
            "-Dcassandra.superuser_setup_delay_ms=0",
            *jmx,
            "-cp", classpath_arg(jars), "org.apache.cassandra.service.CassandraDaemon",
        ]  # fmt: skip

    def _probe(self, timeout: float) -> str | None:
        view = cassandra_view(
            [self.node.host],
            self.settings.cassandra_port,
            timeout,
            self.settings.cassandra_login,
            peers=self.clustered,
            tls=self.settings.client_tls,
        )
        if view is None:
            return None
        missing = self.settings.cassandra_nodes - 1 - len(view.peers)
        if missing > 0:  # answers CQL before gossip told it the whole ring
            raise ProbeError(f"{self.label} knows {len(view.peers)} peer(s) {view.peers} so far")
        return view.version


class CassandraCluster(NodeCluster[CassandraServer]):
    """The local Cassandra as KJ_CASSANDRA_NODES nodes, one `Server` (module contract)."""

    name = "cassandra"

    def _nodes(self) -> tuple[CassandraServer, ...]:
        return tuple(
            CassandraServer(
                self.settings, node, progress=self.progress, tie_to_parent=self.tie_to_parent
            )
            for node in self.settings.cassandra_node_list
        )

    @property
    def address(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def _facts(self, nodes: tuple[ServerStatus, ...]) -> list[tuple[str, str]]:
        del nodes  # its facts come from asking the nodes anew
        by_dc: dict[str, list[str]] = {}
        for node in self.nodes:
            by_dc.setdefault(node.node.datacenter, []).append(node.label)
        facts = [("dcs", "; ".join(f"{dc}: {', '.join(n)}" for dc, n in by_dc.items()))]
        facts.append(("ring", self._ring()))
        return facts

    def _ring(self) -> str:
        """The peers each answering node knows (gossip's view of the ring)."""
        seen: list[str] = []
        for node in self.nodes:
            try:
                view = cassandra_view(
                    [node.node.host],
                    self.settings.cassandra_port,
                    STATUS_PROBE_S,
                    self.settings.cassandra_login,
                    peers=True,
                    tls=self.settings.client_tls,
                )
            except ProbeError:
                continue
            if view is not None:
                seen.append(f"{node.label} knows {len(view.peers)} peers")
        return ", ".join(seen) or "unknown: no node answers"


def refuse_unsupported(settings: StackSettings) -> None:
    """What a local Cassandra cluster does not do (yet): said at once, not found out later."""
    if settings.cassandra_nodes > 1 and settings.security == "on":
        raise StackError(
            "KJ_CASSANDRA_NODES=3 with KJ_SECURITY=on is not supported: the roles would live "
            "on one node (system_auth has one replica); use one node for the secured stack"
        )
