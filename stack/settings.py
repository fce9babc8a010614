"""Where and how the development stack runs, read from `KJ_*` environment variables.

Contract: `StackSettings.from_env()` never touches the network or starts anything; it only
parses (the one loader of `kjconfig.settings`). A malformed variable raises `SettingsError`
(a ValueError) naming the variable. Defaults give a local
stack on 127.0.0.1 (Kafka 9092 + controller 9093, Cassandra 9042 + storage 17000) whose data,
logs, configs and pid files live under `<repo>/.stack`, and whose jars are cached outside the
repo in `~/.cache/kafka-journal/jars` so that later starts need no network.

Variables:
  KJ_STACK                  local (default) | docker
  KJ_STACK_DIR              data dir for both servers (default <repo>/.stack)
  KJ_JAR_CACHE              jar cache (default $XDG_CACHE_HOME or ~/.cache, /kafka-journal/jars)
  KJ_JAVA                   java executable (default: a Java 17 found on this machine)
  KJ_STACK_HOST             address the local servers listen on (default 127.0.0.1)
  KJ_KAFKA_PORT, KJ_KAFKA_CONTROLLER_PORT, KJ_KAFKA_HEAP (the heap of each Kafka node)
  KJ_KAFKA_BROKERS          1 (default) | 3: KRaft nodes, each broker + controller; node i
                            (0, 1, 2) listens on KJ_KAFKA_PORT + 2i and
                            KJ_KAFKA_CONTROLLER_PORT + 2i (9092/9093, 9094/9095, 9096/9097)
  KJ_CASSANDRA_PORT, KJ_CASSANDRA_STORAGE_PORT, KJ_CASSANDRA_JMX_PORT (0 or empty: no JMX port)
  KJ_CASSANDRA_HEAP_MIN, KJ_CASSANDRA_HEAP_MAX (of each node; max default 1g, 768m each of 3)
  KJ_CASSANDRA_NODES        1 (default) | 3: node i (0, 1, 2) on KJ_STACK_HOST + i (127.0.0.1,
                            .2, .3: Linux routes all of 127/8 to lo), the same ports on each
  KJ_CASSANDRA_DATACENTERS  1 (default) | 2: with 3 nodes, nodes 1 and 3 in datacenter1, node
                            2 in datacenter2
  KJ_STACK_TIMEOUT_S        seconds a server may take to become ready (default 180)
  KJ_SECURITY               false (default) | true: SASL/SCRAM + ACLs, Cassandra roles
  KJ_TLS                    false (default) | true, with KJ_SECURITY: a local CA and server
                            certificate (stack/tls.py), Kafka SASL_SSL only, Cassandra TLS only
  KJ_KAFKA_MTLS_PORT        with KJ_TLS: Kafka's second SASL_SSL listener, requiring a client
                            certificate of the stack's CA (default KJ_KAFKA_PORT + 10; + 2i)
  KJ_SPARK                  none (default) | standalone: a Spark master and one worker too
  KJ_SPARK_MASTER_PORT, KJ_SPARK_WEBUI_PORT, KJ_SPARK_WORKER_PORT, KJ_SPARK_WORKER_WEBUI_PORT
  KJ_SPARK_WORKER_CORES, KJ_SPARK_WORKER_MEMORY   what the worker offers executors (2, 1g)
  KJ_EXTERNAL_KAFKA         true: start no Kafka, only check the health of KJ_KAFKA_BOOTSTRAP's
  KJ_EXTERNAL_CASSANDRA     true: start no Cassandra, only check KJ_CASSANDRA_HOSTS' health
  KJ_KAFKA_BOOTSTRAP        where an external Kafka is ("host:port,...")
  KJ_CASSANDRA_HOSTS        where an external Cassandra is ("host[:port],...")

KJ_KAFKA_BOOTSTRAP and KJ_CASSANDRA_HOSTS also tell every client where the servers are, so a
stack started on other ports (KJ_EXTERNAL_KAFKA=false, KJ_KAFKA_PORT) and its clients share one
environment. Their old second meaning stays for now: with KJ_EXTERNAL_KAFKA (or _CASSANDRA) unset,
a set KJ_KAFKA_BOOTSTRAP (KJ_CASSANDRA_HOSTS) still means external, with a warning.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, field_validator, model_validator

import jars
from kjconfig.access import (
    CassandraLogin,
    ClientTls,
    KafkaAccess,
    cassandra_admin,
    kafka_admin,
)
from kjconfig.hosts import HostPort, bootstrap_servers, parse_hosts, shared_port
from kjconfig.settings import KJSettings, Switch, current_environment, warn_deprecated

StackMode = Literal["local", "docker"]

_HEAP = re.compile(r"^[1-9][0-9]*[kmgKMG]$")


def _repo_dir() -> Path:
    """The checkout this package lives in, or the working directory when installed elsewhere.

    An installed (non-editable) copy sits in site-packages, where a data dir must not go.
    """
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def _default_jar_cache() -> Path:
    return jars.cache_root(current_environment())


def _kafka_bootstrap(raw: object) -> str | None:
    if raw is None:
        return None
    return bootstrap_servers(raw) or None  # blank: no external Kafka


def _cassandra_hosts(raw: object) -> tuple[HostPort, ...] | None:
    if raw is None or isinstance(raw, tuple):
        return raw
    return parse_hosts(raw) or None


def _count(raw: object) -> object:
    """A count from a variable's text ("3"), for a Literal field that pydantic matches exactly."""
    return int(raw) if isinstance(raw, str) and raw.strip().isdigit() else raw


def _optional_port(raw: object) -> object:
    return None if raw in ("", "0", 0) else raw


Port = Annotated[int, Field(gt=0, lt=65536)]
Heap = Annotated[str, Field(pattern=_HEAP.pattern)]

# Node i's ports are the base ports + 2i: the default broker and controller ports (9092, 9093)
# are adjacent, and a stride of 2 interleaves the nodes' ports instead of colliding.
_NODE_PORT_STRIDE = 2


@dataclass(frozen=True)
class KafkaNode:
    """One KRaft node of the local Kafka (broker and controller in one JVM)."""

    node_id: int
    port: int
    controller_port: int
    mtls_port: int  # with KJ_TLS: its listener that requires client certificates


# Murmur3's token range is [-2**63, 2**63); node i of a local cluster takes the middle of the
# i-th third, so the three own equal shares with one token each (no allocation work at start)
_TOKEN_SPAN = 2**64


@dataclass(frozen=True)
class CassandraNode:
    """One node of the local Cassandra: its own loopback address, the stack's ports."""

    node_id: int
    host: str
    datacenter: str
    token: int
    rack: str = "rack1"


class StackSettings(KJSettings):
    """Everything `Stack` and the servers need; immutable, so servers can share one instance."""

    data_dir: Path = Field(
        default_factory=lambda: _repo_dir() / ".stack",
        validation_alias=AliasChoices("KJ_STACK_DIR", "data_dir"),
        description="data, logs and configs of both servers (<repo>/.stack)",
    )
    jar_cache: Path = Field(
        default_factory=_default_jar_cache,
        description="resolved jars ($XDG_CACHE_HOME or ~/.cache, /kafka-journal/jars)",
    )
    java: str | None = Field(
        default=None, description="the java executable (default: a Java 17 found)"
    )
    mode: StackMode = Field(
        default="local",
        validation_alias=AliasChoices("KJ_STACK", "mode"),
        description="local | docker",
    )
    host: str = Field(
        default="127.0.0.1",
        validation_alias=AliasChoices("KJ_STACK_HOST", "host"),
        description="the address the local servers listen on",
    )
    kafka_port: Port = Field(default=9092, description="the local Kafka's port")
    kafka_controller_port: Port = Field(
        default=9093, description="the local KRaft controller's port"
    )
    kafka_mtls_port: Annotated[Port | None, BeforeValidator(_optional_port)] = Field(
        default=None,
        description="with KJ_TLS: the local Kafka's second SASL_SSL listener, which requires a "
        "client certificate of the stack's CA (mutual TLS; node i's is + 2i); default "
        "KJ_KAFKA_PORT + 10",
    )
    kafka_heap: Heap = Field(
        default="512m", description="the heap of each local Kafka node, e.g. 512m or 1g"
    )
    kafka_brokers: Annotated[Literal[1, 3], BeforeValidator(_count)] = Field(
        default=1,
        description="local Kafka nodes (each broker + controller): 1, or 3 with replication "
        "factor 3 and min ISR 2; node i's ports are the Kafka and controller ports + 2i",
    )
    cassandra_native_port: Port = Field(
        default=9042,
        validation_alias=AliasChoices("KJ_CASSANDRA_PORT", "cassandra_native_port"),
        description="Cassandra's native port (local, or external hosts given without one)",
    )
    # 7000 is Cassandra's default and also macOS AirPlay's; an odd port avoids both clashes.
    cassandra_storage_port: Port = Field(
        default=17000, description="the local Cassandra's storage port"
    )
    cassandra_jmx_port: Annotated[Port | None, BeforeValidator(_optional_port)] = Field(
        default=None, description="the local Cassandra's JMX port (0 or empty: none)"
    )
    cassandra_heap_min: Heap = Field(
        default="512m", description="the local Cassandra's minimum heap"
    )
    cassandra_heap_max: Heap | None = Field(
        default=None,
        description="each local Cassandra node's maximum heap (default 1g, 768m with 3 nodes)",
    )
    cassandra_nodes: Annotated[Literal[1, 3], BeforeValidator(_count)] = Field(
        default=1,
        description="local Cassandra nodes: 1, or 3 (node i on KJ_STACK_HOST + i, the same "
        "ports; one data centre, or two with KJ_CASSANDRA_DATACENTERS=2)",
    )
    cassandra_datacenters: Annotated[Literal[1, 2], BeforeValidator(_count)] = Field(
        default=1,
        description="data centres of a 3-node local Cassandra: 1, or 2 (nodes 1 and 3 in "
        "datacenter1, node 2 in datacenter2)",
    )
    start_timeout: float = Field(
        default=180.0,
        gt=0,
        validation_alias=AliasChoices("KJ_STACK_TIMEOUT_S", "start_timeout"),
        description="seconds a server may take to become ready",
    )
    security: Switch = Field(
        default="off",
        description="true: Kafka with SASL/SCRAM and ACLs, Cassandra with passwords and roles "
        "(stack/security.py)",
    )
    tls: Switch = Field(
        default="off",
        description="true (with KJ_SECURITY=true): a local CA and server certificate in "
        "<KJ_STACK_DIR>/tls, Kafka's listeners SASL_SSL, Cassandra's clients on TLS only "
        "(stack/tls.py)",
    )
    spark: Literal["none", "standalone"] = Field(
        default="none",
        description="standalone: a Spark master and one worker as child JVMs (stack/spark.py)",
    )
    spark_master_port: Port = Field(default=7077, description="the Spark master's port")
    spark_webui_port: Port = Field(
        default=8080, description="the Spark master's web UI (JSON at /json/)"
    )
    spark_worker_port: Port = Field(default=7078, description="the Spark worker's port")
    spark_worker_webui_port: Port = Field(default=8081, description="the Spark worker's web UI")
    spark_worker_cores: int = Field(default=2, gt=0, description="cores the Spark worker offers")
    spark_worker_memory: Heap = Field(
        default="1g", description="memory the Spark worker offers its executors"
    )
    external_kafka: bool = Field(
        default=False, description="true: start no Kafka, only check KJ_KAFKA_BOOTSTRAP's health"
    )
    external_cassandra: bool = Field(
        default=False,
        description="true: start no Cassandra, only check KJ_CASSANDRA_HOSTS' health",
    )
    given_kafka_bootstrap: str | None = Field(
        default=None,
        validation_alias=AliasChoices("KJ_KAFKA_BOOTSTRAP", "given_kafka_bootstrap"),
        description="where an external Kafka is (host:port,...)",
    )
    given_cassandra_hosts: tuple[HostPort, ...] | None = Field(
        default=None,
        validation_alias=AliasChoices("KJ_CASSANDRA_HOSTS", "given_cassandra_hosts"),
        description="where an external Cassandra is (host[:port],...)",
    )

    @field_validator("given_kafka_bootstrap", mode="before")
    @classmethod
    def _bootstrap(cls, raw: object) -> str | None:
        return _kafka_bootstrap(raw)

    @field_validator("given_cassandra_hosts", mode="before")
    @classmethod
    def _hosts(cls, raw: object) -> tuple[HostPort, ...] | None:
        return _cassandra_hosts(raw)

    @model_validator(mode="before")
    @classmethod
    def _external_by_old_meaning(cls, values: Any) -> Any:
        """The old meaning: a server's address set, and nothing said of starting it, meant
        external. Kept, with a warning naming the variable that says it now."""
        if not isinstance(values, dict):
            return values
        implied: dict[str, bool] = {}
        for switch, given in (
            ("external_kafka", ("KJ_KAFKA_BOOTSTRAP", "given_kafka_bootstrap")),
            ("external_cassandra", ("KJ_CASSANDRA_HOSTS", "given_cassandra_hosts")),
        ):
            variable = f"KJ_{switch.upper()}"
            if switch in values or variable in values:
                continue
            if any(values.get(name) not in (None, "") for name in given):
                warn_deprecated(
                    f"{given[0]} alone no longer means an external server for the stack: set "
                    f"{variable}=true (as assumed now), or {variable}=false to start one"
                )
                implied[switch] = True
        return {**values, **implied}

    @model_validator(mode="after")
    def _external_is_somewhere(self) -> StackSettings:
        if self.external_kafka and self.given_kafka_bootstrap is None:
            raise ValueError("KJ_EXTERNAL_KAFKA=true needs KJ_KAFKA_BOOTSTRAP (where it is)")
        if self.external_cassandra and self.given_cassandra_hosts is None:
            raise ValueError("KJ_EXTERNAL_CASSANDRA=true needs KJ_CASSANDRA_HOSTS (where it is)")
        return self

    @model_validator(mode="after")
    def _tls_is_secured(self) -> StackSettings:
        if self.tls == "on" and self.security == "off":
            raise ValueError("KJ_TLS=true needs KJ_SECURITY=true (Kafka's TLS is SASL_SSL)")
        if self.tls == "on" and self.mode == "docker":
            raise ValueError("KJ_TLS=true runs local servers (stack/tls.py), not docker")
        return self

    @model_validator(mode="after")
    def _distinct_kafka_ports(self) -> StackSettings:
        ports = [
            p
            for node in self.kafka_nodes
            for p in (node.port, node.controller_port)
            + ((node.mtls_port,) if self.tls == "on" else ())
        ]
        if len(set(ports)) != len(ports) or max(ports) >= 65536:
            raise ValueError(
                "KJ_KAFKA_PORT, KJ_KAFKA_CONTROLLER_PORT (and KJ_KAFKA_MTLS_PORT) give "
                f"{self.kafka_brokers} Kafka node(s) the ports {ports}: they must be distinct "
                "and below 65536"
            )
        return self

    @model_validator(mode="after")
    def _cassandra_nodes_fit(self) -> StackSettings:
        if self.cassandra_datacenters > self.cassandra_nodes:
            raise ValueError("KJ_CASSANDRA_DATACENTERS=2 needs KJ_CASSANDRA_NODES=3")
        if self.cassandra_nodes > 1:
            try:
                first = ipaddress.IPv4Address(self.host)
            except ValueError:
                raise ValueError(
                    f"KJ_CASSANDRA_NODES={self.cassandra_nodes} puts node i on KJ_STACK_HOST + i: "
                    f"it must be an IPv4 address, not {self.host!r}"
                ) from None
            if first + self.cassandra_nodes - 1 > ipaddress.IPv4Address("127.255.255.254"):
                raise ValueError(f"KJ_STACK_HOST={self.host} leaves no room for its nodes")
        return self

    @field_validator("data_dir", "jar_cache", mode="after")
    @classmethod
    def _absolute(cls, path: Path) -> Path:
        return path.expanduser().resolve()

    @property
    def kafka_external(self) -> bool:
        return self.external_kafka

    @property
    def cassandra_external(self) -> bool:
        return self.external_cassandra

    @property
    def external_kafka_bootstrap(self) -> str | None:
        """The external Kafka's servers; None when the stack runs its own."""
        return self.given_kafka_bootstrap if self.external_kafka else None

    @property
    def _external_cassandra(self) -> tuple[HostPort, ...]:
        return (self.given_cassandra_hosts or ()) if self.external_cassandra else ()

    @property
    def external_cassandra_hosts(self) -> tuple[str, ...] | None:
        if not self.external_cassandra:
            return None
        return tuple(host for host, _port in self._external_cassandra)

    @property
    def cassandra_port(self) -> int:
        """The port clients use: the external hosts' own, or the native port."""
        port = shared_port(self._external_cassandra)
        return self.cassandra_native_port if port is None else port

    @property
    def _kafka_mtls_port(self) -> int:
        return self.kafka_port + 10 if self.kafka_mtls_port is None else self.kafka_mtls_port

    @property
    def kafka_mtls_bootstrap(self) -> str:
        """The local Kafka's mutual-TLS listeners (KJ_TLS=true): a client there must present a
        certificate of the stack's CA as well as its SCRAM login."""
        return ",".join(f"{self.host}:{node.mtls_port}" for node in self.kafka_nodes)

    @property
    def kafka_nodes(self) -> tuple[KafkaNode, ...]:
        """The local Kafka's nodes, ids from 1, ports derived as KJ_KAFKA_BROKERS says."""
        return tuple(
            KafkaNode(
                node_id=i + 1,
                port=self.kafka_port + _NODE_PORT_STRIDE * i,
                controller_port=self.kafka_controller_port + _NODE_PORT_STRIDE * i,
                mtls_port=self._kafka_mtls_port + _NODE_PORT_STRIDE * i,
            )
            for i in range(self.kafka_brokers)
        )

    @property
    def cassandra_heap(self) -> str:
        """Each local Cassandra node's maximum heap: KJ_CASSANDRA_HEAP_MAX, else 1g for one
        node and 768m for each of three (2.3 GB for the three; see the README's memory)."""
        if self.cassandra_heap_max is not None:
            return self.cassandra_heap_max
        return "1g" if self.cassandra_nodes == 1 else "768m"

    @property
    def cassandra_node_list(self) -> tuple[CassandraNode, ...]:
        """The local Cassandra's nodes, ids from 1: node i on `host` + i (one node: `host`)."""
        if self.cassandra_nodes == 1:
            return (CassandraNode(1, self.host, "datacenter1", 0),)
        first = ipaddress.IPv4Address(self.host)
        third = _TOKEN_SPAN // 3
        return tuple(
            CassandraNode(
                node_id=i + 1,
                host=str(first + i),
                datacenter=f"datacenter{i % self.cassandra_datacenters + 1}",
                token=-(2**63) + third * i + third // 2,
            )
            for i in range(self.cassandra_nodes)
        )

    @property
    def kafka_quorum_voters(self) -> str:
        """`controller.quorum.voters`: every node is a controller, "id@host:port,..."."""
        return ",".join(f"{n.node_id}@{self.host}:{n.controller_port}" for n in self.kafka_nodes)

    @property
    def kafka_bootstrap(self) -> str:
        """The bootstrap servers clients use, external or local (every local broker)."""
        if self.external_kafka_bootstrap is not None:
            return self.external_kafka_bootstrap
        return ",".join(f"{self.host}:{node.port}" for node in self.kafka_nodes)

    @property
    def cassandra_hosts(self) -> list[str]:
        """The contact points clients use (all on `cassandra_port`), external or local."""
        if self.external_cassandra_hosts is not None:
            return list(self.external_cassandra_hosts)
        return [node.host for node in self.cassandra_node_list]

    def secured_twin(self) -> StackSettings:
        """A local stack with security on beside this one: data dir `<dir>-secured`, every
        port + 100, so a plain stack and a secured one run at once (the `secured` tests)."""
        return self.replace(
            security="on",
            data_dir=self.data_dir.with_name(f"{self.data_dir.name}-secured"),
            kafka_port=self.kafka_port + 100,
            kafka_controller_port=self.kafka_controller_port + 100,
            cassandra_native_port=self.cassandra_native_port + 100,
            cassandra_storage_port=self.cassandra_storage_port + 100,
            external_kafka=False,
            external_cassandra=False,
        )

    def cassandra_cluster_twin(self) -> StackSettings:
        """A local three-node Cassandra beside this stack's: data dir `<dir>-cassandra3`, its
        ports + 200 (on the nodes' own addresses), small heaps; for the tests that kill a node
        (they use this stack's Kafka), never stopping the Cassandra others use."""
        return self.replace(
            data_dir=self.data_dir.with_name(f"{self.data_dir.name}-cassandra3"),
            cassandra_nodes=3,
            cassandra_native_port=self.cassandra_native_port + 200,
            cassandra_storage_port=self.cassandra_storage_port + 200,
            cassandra_jmx_port=None,
            external_cassandra=False,
        )

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.host}:{self.spark_master_port}"

    @property
    def kafka_access(self) -> KafkaAccess:
        """How the stack itself reaches Kafka: as the admin when secured."""
        return self.kafka_access_at(self.kafka_bootstrap)

    def kafka_access_at(self, bootstrap: str) -> KafkaAccess:
        """How the stack reaches the brokers at `bootstrap` (one node, say): as `kafka_access`."""
        if self.security == "on":
            return kafka_admin(bootstrap, self.client_tls)
        return KafkaAccess(bootstrap)

    @property
    def tls_dir(self) -> Path:
        """The local stack's CA and server certificate (stack/tls.py)."""
        return self.data_dir / "tls"

    @property
    def tls_ca(self) -> Path:
        """The CA file the stack's clients trust with TLS on (stack/tls.py makes it)."""
        return self.tls_dir / "ca.pem"

    @property
    def client_tls(self) -> ClientTls | None:
        """How the stack's own clients (probes, the admins) speak TLS: trusting its CA."""
        return ClientTls(self.tls_ca) if self.tls == "on" else None

    @property
    def cassandra_login(self) -> CassandraLogin | None:
        """How the stack itself logs in to Cassandra: as the admin when secured."""
        if self.security == "on":
            return cassandra_admin()
        return None
