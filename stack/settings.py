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
  KJ_KAFKA_PORT, KJ_KAFKA_CONTROLLER_PORT, KJ_KAFKA_HEAP
  KJ_CASSANDRA_PORT, KJ_CASSANDRA_STORAGE_PORT, KJ_CASSANDRA_JMX_PORT (0 or empty: no JMX port)
  KJ_CASSANDRA_HEAP_MIN, KJ_CASSANDRA_HEAP_MAX
  KJ_STACK_TIMEOUT          seconds a server may take to become ready (default 180)
  KJ_SECURITY               off (default) | on: SASL/SCRAM + ACLs, Cassandra roles
  KJ_SPARK                  none (default) | standalone: a Spark master and one worker too
  KJ_SPARK_MASTER_PORT, KJ_SPARK_WEBUI_PORT, KJ_SPARK_WORKER_PORT, KJ_SPARK_WORKER_WEBUI_PORT
  KJ_SPARK_WORKER_CORES, KJ_SPARK_WORKER_MEMORY   what the worker offers executors (2, 1g)
  KJ_KAFKA_BOOTSTRAP        external Kafka ("host:port,..."): start none, only check health
  KJ_CASSANDRA_HOSTS        external Cassandra ("host[:port],..."): start none, only check health
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, BeforeValidator, Field, field_validator

import jars
from kjconfig.access import CassandraLogin, KafkaAccess, cassandra_admin, kafka_admin
from kjconfig.settings import KJSettings, current_environment

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


def _split_host_port(item: str) -> tuple[str, int | None]:
    """`host` or `host:port`; IPv6 literals are written `[::1]:9042`."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif item.count(":") == 1:
        host, port = item.split(":")
    else:
        host, port = item, None
    if not host:
        raise ValueError(f"empty host in {item!r}")
    if port is None:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port in {item!r}")
    return host, int(port)


def _items(raw: object) -> list[str]:
    return [item.strip() for item in str(raw).split(",") if item.strip()]


def _kafka_bootstrap(raw: object) -> str | None:
    if raw is None or not _items(raw):
        return None
    for item in _items(raw):
        if _split_host_port(item)[1] is None:
            raise ValueError(f"{item!r} needs a port (host:port)")
    return ",".join(_items(raw))


def _cassandra_hosts(raw: object) -> tuple[tuple[str, int | None], ...] | None:
    if raw is None or isinstance(raw, tuple):
        return raw
    parsed = tuple(_split_host_port(item) for item in _items(raw))
    if len({port for _host, port in parsed if port is not None}) > 1:
        raise ValueError(f"{raw!r}: all hosts must use the same port")
    return parsed or None


def _optional_port(raw: object) -> object:
    return None if raw in ("", "0", 0) else raw


Port = Annotated[int, Field(gt=0, lt=65536)]
Heap = Annotated[str, Field(pattern=_HEAP.pattern)]


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
    kafka_heap: Heap = Field(default="512m", description="the local Kafka's heap, e.g. 512m or 1g")
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
    cassandra_heap_max: Heap = Field(default="1g", description="the local Cassandra's maximum heap")
    start_timeout: float = Field(
        default=180.0,
        gt=0,
        validation_alias=AliasChoices("KJ_STACK_TIMEOUT", "start_timeout"),
        description="seconds a server may take to become ready",
    )
    security: Literal["off", "on"] = Field(
        default="off",
        description="on: Kafka with SASL/SCRAM and ACLs, Cassandra with passwords and roles "
        "(stack/security.py)",
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
    external_kafka_bootstrap: str | None = Field(
        default=None,
        validation_alias=AliasChoices("KJ_KAFKA_BOOTSTRAP", "external_kafka_bootstrap"),
        description="external Kafka (host:port,...): start none, only check its health",
    )
    external_cassandra: tuple[tuple[str, int | None], ...] | None = Field(
        default=None,
        validation_alias=AliasChoices("KJ_CASSANDRA_HOSTS", "external_cassandra"),
        description="external Cassandra (host[:port],...): start none, only check its health",
    )

    @field_validator("external_kafka_bootstrap", mode="before")
    @classmethod
    def _bootstrap(cls, raw: object) -> str | None:
        return _kafka_bootstrap(raw)

    @field_validator("external_cassandra", mode="before")
    @classmethod
    def _hosts(cls, raw: object) -> tuple[tuple[str, int | None], ...] | None:
        return _cassandra_hosts(raw)

    @field_validator("data_dir", "jar_cache", mode="after")
    @classmethod
    def _absolute(cls, path: Path) -> Path:
        return path.expanduser().resolve()

    @property
    def kafka_external(self) -> bool:
        return self.external_kafka_bootstrap is not None

    @property
    def cassandra_external(self) -> bool:
        return self.external_cassandra is not None

    @property
    def external_cassandra_hosts(self) -> tuple[str, ...] | None:
        if self.external_cassandra is None:
            return None
        return tuple(host for host, _port in self.external_cassandra)

    @property
    def cassandra_port(self) -> int:
        """The port clients use: the external hosts' own, or the native port."""
        ports = {port for _host, port in self.external_cassandra or () if port is not None}
        return ports.pop() if ports else self.cassandra_native_port

    @property
    def kafka_bootstrap(self) -> str:
        """The bootstrap servers clients use, external or local."""
        if self.external_kafka_bootstrap is not None:
            return self.external_kafka_bootstrap
        return f"{self.host}:{self.kafka_port}"

    @property
    def cassandra_hosts(self) -> list[str]:
        """The contact points clients use (all on `cassandra_port`), external or local."""
        if self.external_cassandra_hosts is not None:
            return list(self.external_cassandra_hosts)
        return [self.host]

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
            external_kafka_bootstrap=None,
            external_cassandra=None,
        )

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.host}:{self.spark_master_port}"

    @property
    def kafka_access(self) -> KafkaAccess:
        """How the stack itself reaches Kafka: as the admin when secured."""
        if self.security == "on":
            return kafka_admin(self.kafka_bootstrap)
        return KafkaAccess(self.kafka_bootstrap)

    @property
    def cassandra_login(self) -> CassandraLogin | None:
        """How the stack itself logs in to Cassandra: as the admin when secured."""
        if self.security == "on":
            return cassandra_admin()
        return None
