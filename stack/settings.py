"""Where and how the development stack runs, read from `KJ_*` environment variables.

Contract: `StackSettings.from_env()` never touches the network or starts anything; it only
parses. A malformed variable raises `ValueError` naming the variable. Defaults give a local
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
  KJ_KAFKA_BOOTSTRAP        external Kafka ("host:port,..."): start none, only check health
  KJ_CASSANDRA_HOSTS        external Cassandra ("host[:port],..."): start none, only check health
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

StackMode = Literal["local", "docker"]

_HEAP = re.compile(r"^[1-9][0-9]*[kmgKMG]$")


def _repo_dir() -> Path:
    """The checkout this package lives in, or the working directory when installed elsewhere.

    An installed (non-editable) copy sits in site-packages, where a data dir must not go.
    """
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def _default_jar_cache(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-journal" / "jars"


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{name}={raw!r}: expected a TCP port (1-65535)")
    return int(raw)


def _heap(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name, "").strip() or default
    if not _HEAP.match(raw):
        raise ValueError(f"{name}={raw!r}: expected a JVM heap size such as 512m or 1g")
    return raw


def _split_host_port(item: str, name: str) -> tuple[str, int | None]:
    """`host` or `host:port`; IPv6 literals are written `[::1]:9042`."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif item.count(":") == 1:
        host, port = item.split(":")
    else:
        host, port = item, None
    if not host:
        raise ValueError(f"{name}: empty host in {item!r}")
    if port is None:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{name}: bad port in {item!r}")
    return host, int(port)


def _items(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _kafka_bootstrap(env: Mapping[str, str]) -> str | None:
    raw = env.get("KJ_KAFKA_BOOTSTRAP", "").strip()
    if not raw:
        return None
    for item in _items(raw):
        _host, port = _split_host_port(item, "KJ_KAFKA_BOOTSTRAP")
        if port is None:
            raise ValueError(f"KJ_KAFKA_BOOTSTRAP: {item!r} needs a port (host:port)")
    return ",".join(_items(raw))


def _cassandra_hosts(
    env: Mapping[str, str], default_port: int
) -> tuple[tuple[str, ...], int] | None:
    """The external hosts and their one port (the driver uses one port for all contact points)."""
    raw = env.get("KJ_CASSANDRA_HOSTS", "").strip()
    if not raw:
        return None
    parsed = [_split_host_port(item, "KJ_CASSANDRA_HOSTS") for item in _items(raw)]
    ports = {port for _host, port in parsed if port is not None}
    if len(ports) > 1:
        raise ValueError(f"KJ_CASSANDRA_HOSTS={raw!r}: all hosts must use the same port")
    port = ports.pop() if ports else default_port
    return tuple(host for host, _port in parsed), port


@dataclass(frozen=True)
class StackSettings:
    """Everything `Stack` and the servers need; immutable, so servers can share one instance."""

    data_dir: Path
    jar_cache: Path
    java: str | None = None  # None: stack.java finds a Java 17
    mode: StackMode = "local"
    host: str = "127.0.0.1"
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    kafka_heap: str = "512m"
    cassandra_port: int = 9042
    # 7000 is Cassandra's default and also macOS AirPlay's; an odd port avoids both clashes.
    cassandra_storage_port: int = 17000
    cassandra_jmx_port: int | None = None  # None: no JMX port is opened
    cassandra_heap_min: str = "512m"
    cassandra_heap_max: str = "1g"
    start_timeout: float = 180.0
    external_kafka_bootstrap: str | None = None
    external_cassandra_hosts: tuple[str, ...] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StackSettings:
        """Parse `env` (default: `os.environ`); raises ValueError on a malformed variable."""
        env = os.environ if env is None else env
        mode = env.get("KJ_STACK", "").strip() or "local"
        if mode not in ("local", "docker"):
            raise ValueError(f"KJ_STACK={mode!r}: expected 'local' or 'docker'")
        data_dir = env.get("KJ_STACK_DIR", "").strip()
        jar_cache = env.get("KJ_JAR_CACHE", "").strip()
        jmx = env.get("KJ_CASSANDRA_JMX_PORT", "").strip()
        timeout_raw = env.get("KJ_STACK_TIMEOUT", "").strip() or "180"
        try:
            timeout = float(timeout_raw)
        except ValueError:
            timeout = -1.0
        if timeout <= 0:
            raise ValueError(f"KJ_STACK_TIMEOUT={timeout_raw!r}: expected seconds > 0")
        cassandra_port = _port(env, "KJ_CASSANDRA_PORT", 9042)
        external_cassandra = _cassandra_hosts(env, cassandra_port)
        if external_cassandra is not None:
            cassandra_port = external_cassandra[1]
        return cls(
            data_dir=Path(data_dir).expanduser().resolve() if data_dir else _repo_dir() / ".stack",
            jar_cache=Path(jar_cache).expanduser().resolve()
            if jar_cache
            else _default_jar_cache(env),
            java=env.get("KJ_JAVA", "").strip() or None,
            mode="docker" if mode == "docker" else "local",
            host=env.get("KJ_STACK_HOST", "").strip() or "127.0.0.1",
            kafka_port=_port(env, "KJ_KAFKA_PORT", 9092),
            kafka_controller_port=_port(env, "KJ_KAFKA_CONTROLLER_PORT", 9093),
            kafka_heap=_heap(env, "KJ_KAFKA_HEAP", "512m"),
            cassandra_port=cassandra_port,
            cassandra_storage_port=_port(env, "KJ_CASSANDRA_STORAGE_PORT", 17000),
            cassandra_jmx_port=None if jmx in ("", "0") else _port(env, "KJ_CASSANDRA_JMX_PORT", 0),
            cassandra_heap_min=_heap(env, "KJ_CASSANDRA_HEAP_MIN", "512m"),
            cassandra_heap_max=_heap(env, "KJ_CASSANDRA_HEAP_MAX", "1g"),
            start_timeout=timeout,
            external_kafka_bootstrap=_kafka_bootstrap(env),
            external_cassandra_hosts=None if external_cassandra is None else external_cassandra[0],
        )

    @property
    def kafka_external(self) -> bool:
        return self.external_kafka_bootstrap is not None

    @property
    def cassandra_external(self) -> bool:
        return self.external_cassandra_hosts is not None

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

    @property
    def kafka_dir(self) -> Path:
        return self.data_dir / "kafka"

    @property
    def cassandra_dir(self) -> Path:
        return self.data_dir / "cassandra"
