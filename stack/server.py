"""What every server of the stack offers, and the shared life cycle of a child-JVM server.

Contract:
- `Server` is the protocol `Stack`, the CLI and fault tests use: start/stop/restart/kill9 one
  server while the other keeps running, ask whether it is healthy, and read its status.
  `controllable` is False for servers this process may not touch (external ones).
- `JvmServer` runs one server as a child JVM under `<data dir>/<label>/` (`label` is `name`,
  or a cluster node's own, e.g. kafka-2): config files, data, logs (`logs/`), and
  `<name>.pid`. `start` = `prepare` (Java, jars, configs, one-time storage set-up; safe from
  any thread) + `spawn` + `wait_ready` (the real protocol probe answers, or
  the JVM died and the error shows the end of its logs). A server that is already healthy is
  left alone. `start` and `stop` hold a lock file in the server's directory, so concurrent
  sessions (threads or processes) never launch two JVMs on one data directory. Subclasses
  provide the configs, the JVM command line and the probe.
- `NodeCluster` runs several `JvmServer` nodes as one `Server` (KafkaCluster, CassandraCluster):
  `start` locks every node (in node order), launches the ones down all at once, then waits for
  each; if one does not become ready, the nodes it launched are stopped again. Subclasses
  provide the nodes, the address and the status's facts, and may act before a launch.
- `ExternalServer` is a server someone else runs: only probed, never started or stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypedDict, TypeVar, Unpack

from stack import process
from stack.errors import StackError
from stack.health import STATUS_PROBE_S, ProbeError, answers, until_answered
from stack.jars import classpath, pom_version
from stack.java import find_java
from stack.progress import Progress, print_progress
from stack.settings import StackSettings

_VERSION_PROPERTY = "-Dkafka-journal.version="
N = TypeVar("N")
J = TypeVar("J", bound="JvmServer")


@dataclass(frozen=True)
class ServerStatus:
    """One server as `stack status` shows it."""

    name: str
    kind: str  # "local" (child JVM), "external" or "docker"
    address: str
    healthy: bool
    ports: dict[str, int] = field(default_factory=dict)
    pid: int | None = None
    version: str | None = None
    data_dir: Path | None = None
    log_file: Path | None = None
    detail: str | None = None  # why it is not healthy, when known; or what it reports (Spark)
    nodes: tuple[ServerStatus, ...] = ()  # a cluster's members, each with its own status
    facts: tuple[tuple[str, str], ...] = ()  # more (title, text) lines, e.g. a cluster's quorum


class Server(Protocol):
    """A server of the stack (see the module contract)."""

    @property
    def name(self) -> str: ...

    @property
    def controllable(self) -> bool: ...

    def start(self, timeout: float | None = None) -> bool:
        """Make the server healthy; True if this call launched it (False: it was up)."""
        ...

    def stop(self, timeout: float | None = None) -> None: ...

    def restart(self, timeout: float | None = None) -> None: ...

    def kill9(self) -> None: ...

    def pid(self) -> int | None: ...

    def healthy(self) -> bool: ...

    def status(self) -> ServerStatus: ...


def _tail(path: Path, lines: int) -> str:
    try:
        content = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(content[-lines:])


class LocalOptions(TypedDict, total=False):
    """`LocalServer`'s options, for a constructor that hands them on."""

    progress: Progress
    tie_to_parent: bool


class LocalServer:
    """A server this process runs: its settings, where its progress goes, and whether its
    JVMs die with this process (`tie_to_parent`)."""

    def __init__(
        self,
        settings: StackSettings,
        *,
        progress: Progress = print_progress,
        tie_to_parent: bool = False,
    ) -> None:
        self.settings = settings
        self.progress = progress
        self.tie_to_parent = tie_to_parent


class JvmServer(LocalServer, ABC):
    """A server run as a child JVM with its files under `<data dir>/<name>/`."""

    name: ClassVar[str]
    accepted_java: ClassVar[tuple[int, ...]] = (17,)
    stop_timeout: ClassVar[float] = 60.0
    controllable: ClassVar[bool] = True
    _argv: list[str] | None = None  # the command line, once `prepare` wrote it

    # -- what a subclass provides ------------------------------------------------------------

    @property
    @abstractmethod
    def address(self) -> str:
        """Where clients connect, e.g. "127.0.0.1:9092"."""

    @property
    @abstractmethod
    def ports(self) -> dict[str, int]:
        """The ports the server listens on, by role."""

    @property
    @abstractmethod
    def server_log(self) -> Path:
        """The log the server itself writes (INFO level)."""

    @abstractmethod
    def _configure(self) -> None:
        """Write the config files (every start, so changed settings apply)."""

    def _jars(self) -> list[Path]:
        """The classpath (default: the jars `stack/maven/<name>.pom.xml` pins)."""
        return classpath(self.name, self.settings.jar_cache, self.progress)

    def _environment(self) -> dict[str, str] | None:
        """The JVM's environment (default None: this process's)."""
        return None

    def _prepare_storage(self, java: str, jars: list[Path]) -> None:
        """One-time storage set-up before the first start (default: nothing)."""
        del java, jars

    @abstractmethod
    def _command(self, java: str, jars: list[Path]) -> list[str]:
        """The JVM command line, without the identity properties `JvmServer` adds."""

    @abstractmethod
    def _probe(self, timeout: float) -> str | None:
        """Answer the server's protocol or raise ProbeError; may return the server's version."""

    # -- files ---------------------------------------------------------------------------------

    @property
    def label(self) -> str:
        """The name in messages and the data dir's name: `name`, or one node's of a cluster."""
        return self.name

    @property
    def home(self) -> Path:
        return self.settings.data_dir / self.label

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self.name}.pid"

    @property
    def console_log(self) -> Path:
        """The JVM's stdout and stderr (crashes before logging starts end up here)."""
        return self.home / "logs" / f"{self.name}.out"

    @property
    def version(self) -> str:
        return pom_version(self.name)

    @property
    def _marker(self) -> str:
        # On the JVM command line so a pid file can be checked against /proc (pid reuse).
        return f"-Dkafka-journal.home={self.home}"

    # -- life cycle ----------------------------------------------------------------------------

    def pid(self) -> int | None:
        """The pid of this server's JVM if it runs (from the pid file, checked), else None."""
        return process.running_pid(self.pid_file, self._marker)

    def prepare(self) -> None:
        """Find Java, resolve the jars, write configs, set up storage once. Thread-safe."""
        java = find_java(self.settings.java, self.accepted_java)
        jars = self._jars()
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        self._configure()
        self._prepare_storage(java, jars)
        self._argv = [
            java,
            self._marker,
            f"{_VERSION_PROPERTY}{self.version}",
            *self._command(java, jars),
        ]

    def spawn(self) -> int:
        """Start the JVM (after `prepare`) and return its pid; does not wait for readiness."""
        if self._argv is None:
            self.prepare()
        assert self._argv is not None
        running = self.pid()
        if running is not None:
            raise StackError(f"{self.label} already runs (pid {running}, {self.pid_file})")
        pid = process.spawn(
            self._argv,
            cwd=self.home,
            log_file=self.console_log,
            pid_file=self.pid_file,
            env=self._environment(),
            tie_to_parent=self.tie_to_parent,
        )
        self.progress(f"{self.label}: started pid {pid}, log {self.server_log}")
        return pid

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the probe answers; raise StackError if the JVM dies or time runs out."""
        limit = self.settings.start_timeout if timeout is None else timeout
        started = time.monotonic()

        def still_running() -> None:
            if self.pid() is None:
                raise StackError(
                    f"{self.label} exited before it was ready; end of {self.server_log}:\n"
                    f"{_tail(self.server_log, 25)}\nend of {self.console_log}:\n"
                    f"{_tail(self.console_log, 15)}"
                )

        try:
            until_answered(lambda: self._probe(timeout=5.0), limit, between=still_running)
        except ProbeError as error:
            raise StackError(
                f"{self.label} (pid {self.pid()}) not ready after {limit:.0f} s ({error}); "
                f"see {self.server_log}"
            ) from error
        self.progress(
            f"{self.label}: ready at {self.address} after {time.monotonic() - started:.1f} s"
        )

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Serialise start and stop across threads and processes (two test sessions at once).

        Without it, two sessions that both find the server down would both format the
        storage and launch a JVM on the same data directory. flock is released by the kernel
        when the holder dies, so a killed session never leaves the lock taken.
        """
        self.home.mkdir(parents=True, exist_ok=True)
        with (self.home / f".{self.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def start(self, timeout: float | None = None) -> bool:
        """Start the server unless it is healthy already; return once it answers.

        True if this call launched the JVM. If the JVM it launched does not become ready,
        it is stopped again before the error is raised.
        """
        with self._exclusive():
            if self.healthy():
                return False
            launched = self.pid() is None
            if launched:
                self.progress(f"{self.label} {self.version}: starting")
                self.prepare()
                self.spawn()
            else:
                self.progress(f"{self.label}: already starting (pid {self.pid()}), waiting")
            try:
                self.wait_ready(timeout)
            except BaseException:
                if launched:
                    self._stop_unlocked(None)
                raise
            return launched

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM the JVM, SIGKILL it if it outlives `timeout`; no-op if it does not run."""
        with self._exclusive():
            self._stop_unlocked(timeout)

    def _stop_unlocked(self, timeout: float | None) -> None:
        pid = self.pid()
        if pid is None:
            return
        started = time.monotonic()
        graceful = process.stop(pid, self.stop_timeout if timeout is None else timeout)
        with contextlib.suppress(OSError):
            self.pid_file.unlink()
        how = "stopped" if graceful else "did not stop in time; killed"
        self.progress(f"{self.label}: {how} (pid {pid}, {time.monotonic() - started:.1f} s)")

    def restart(self, timeout: float | None = None) -> None:
        self.stop()
        self.start(timeout)

    def kill9(self) -> None:
        """SIGKILL the JVM at once (a crash, for fault tests); its pid file goes stale."""
        pid = self.pid()
        if pid is not None:
            process.kill9(pid)
            self.progress(f"{self.label}: killed -9 (pid {pid})")

    def healthy(self) -> bool:
        return answers(self._probe)

    def status(self) -> ServerStatus:
        pid = self.pid()
        detail = None
        version: str | None = None
        try:
            version = self._probe(STATUS_PROBE_S)
            healthy = True
        except ProbeError as error:
            healthy, detail = False, str(error)
        if version is None and pid is not None:
            argv = process.command_line(pid) or []
            running = [
                a.removeprefix(_VERSION_PROPERTY) for a in argv if a.startswith(_VERSION_PROPERTY)
            ]
            version = running[0] if running else self.version
        elif version is None and not healthy:
            version = self.version  # what `start` would run
        # else: healthy without our pid is someone else's server; its version is unknown
        return ServerStatus(
            name=self.label,
            kind="local",
            address=self.address,
            healthy=healthy,
            ports=self.ports,
            pid=pid,
            version=version,
            data_dir=self.home,
            log_file=self.server_log,
            detail=detail,
        )


def on_each(nodes: Sequence[N], action: Callable[[N], None]) -> None:
    """`action` on every node of a cluster at once; the first error raised after all had
    their turn."""
    if not nodes:
        return
    with ThreadPoolExecutor(len(nodes), thread_name_prefix="stack-node") as pool:
        errors = [f.exception() for f in [pool.submit(action, node) for node in nodes]]
    for error in errors:
        if error is not None:
            raise error


class NodeCluster(LocalServer, ABC, Generic[J]):
    """A server's nodes as one `Server` (see the module contract); `nodes` are the single
    nodes, for fault tests that kill one."""

    name: ClassVar[str]
    controllable: ClassVar[bool] = True

    def __init__(self, settings: StackSettings, **options: Unpack[LocalOptions]) -> None:
        super().__init__(settings, **options)
        self.nodes = self._nodes()

    @abstractmethod
    def _nodes(self) -> tuple[J, ...]:
        """The nodes, as the settings say (built once, by the constructor)."""

    @property
    @abstractmethod
    def address(self) -> str:
        """Where clients connect: every node's address."""

    def _before_launch(self, launch: Sequence[J]) -> None:
        """Under every node's lock, before the nodes to launch are prepared (default:
        nothing)."""
        del launch

    @abstractmethod
    def _facts(self, nodes: tuple[ServerStatus, ...]) -> list[tuple[str, str]]:
        """The cluster's own lines of `status` (its nodes' statuses are given)."""

    def start(self, timeout: float | None = None) -> bool:
        """Start every node that is down, all before waiting for any (a Kafka node is ready
        only once a majority of the quorum runs; Cassandra's are seeds, none waits for
        another). True if this call launched any node; if one does not become ready, the
        nodes this call launched are stopped again and the error raised."""
        with contextlib.ExitStack() as locks:
            for node in self.nodes:  # always in node order: two callers cannot deadlock
                locks.enter_context(node._exclusive())
            down = [node for node in self.nodes if not node.healthy()]
            if not down:
                return False
            launch = [node for node in down if node.pid() is None]
            self._before_launch(launch)
            for node in launch:
                self.progress(f"{node.label} {node.version}: starting")
            # in parallel: a Kafka node's first prepare runs a JVM (the storage format)
            on_each(launch, lambda node: node.prepare())
            try:
                for node in launch:
                    node.spawn()
                on_each(down, lambda node: node.wait_ready(timeout))
            except BaseException:
                on_each(launch, lambda node: node._stop_unlocked(None))
                raise
            return bool(launch)

    def stop(self, timeout: float | None = None) -> None:
        """Stop every node at once: a Kafka broker's controlled shutdown needs the quorum."""
        on_each(list(self.nodes), lambda node: node.stop(timeout))

    def restart(self, timeout: float | None = None) -> None:
        self.stop()
        self.start(timeout)

    def kill9(self) -> None:
        for node in self.nodes:
            node.kill9()

    def pid(self) -> int | None:
        """The first running node's pid; None when no node runs."""
        return next((pid for pid in (node.pid() for node in self.nodes) if pid), None)

    def healthy(self) -> bool:
        """Every node answers (the cluster may serve with fewer; `status` shows which)."""
        return all(answers(node._probe) for node in self.nodes)

    def status(self) -> ServerStatus:
        nodes = tuple(node.status() for node in self.nodes)
        facts = self._facts(nodes)
        down = [status.name for status in nodes if not status.healthy]
        return ServerStatus(
            name=self.name,
            kind="local",
            address=self.address,
            healthy=not down,
            version=nodes[0].version,
            data_dir=self.settings.data_dir,
            detail=f"{', '.join(down)} down" if down else None,
            nodes=nodes,
            facts=tuple(facts),
        )


class ExternalServer:
    """A server run by someone else (KJ_KAFKA_BOOTSTRAP / KJ_CASSANDRA_HOSTS): probe only."""

    controllable = False

    def __init__(
        self,
        name: str,
        address: str,
        probe: Callable[[float], str | None],
        *,
        wait: float = 30.0,
        progress: Progress = print_progress,
    ) -> None:
        self._name = name
        self.address = address
        self._probe = probe
        self._wait = wait
        self.progress = progress

    @property
    def name(self) -> str:
        return self._name

    def _refuse(self, action: str) -> StackError:
        return StackError(
            f"{self._name} at {self.address} is external; this stack cannot {action} it"
        )

    def start(self, timeout: float | None = None) -> bool:
        """Nothing to start: wait (bounded) until the external server answers; False."""
        within = self._wait if timeout is None else timeout
        try:
            until_answered(lambda: self._probe(5.0), within)
        except ProbeError as error:
            raise StackError(f"external {self._name} at {self.address}: {error}") from error
        self.progress(f"{self._name}: external server at {self.address} is healthy")
        return False

    def stop(self, timeout: float | None = None) -> None:
        raise self._refuse("stop")

    def restart(self, timeout: float | None = None) -> None:
        raise self._refuse("restart")

    def kill9(self) -> None:
        raise self._refuse("kill")

    def pid(self) -> int | None:
        return None

    def healthy(self) -> bool:
        return answers(self._probe)

    def status(self) -> ServerStatus:
        try:
            version = self._probe(STATUS_PROBE_S)
            return ServerStatus(self._name, "external", self.address, True, version=version)
        except ProbeError as error:
            return ServerStatus(self._name, "external", self.address, False, detail=str(error))
