"""The development stack: one Kafka and one Cassandra (each one node, or a cluster of three),
up and down together.

Contract:
- `Stack(settings)` picks each server's kind: external when KJ_KAFKA_BOOTSTRAP /
  KJ_CASSANDRA_HOSTS is set (probed only), containers when KJ_STACK=docker, otherwise child JVMs
  from Maven Central jars. Constructing a `Stack` starts nothing.
- `up()` reuses every server that already answers its protocol (started earlier by the CLI,
  another test session, or anyone on those ports) and starts the others in parallel; it
  returns the names it started. If one fails, the ones this call started are stopped again
  and the error is raised, so a failed `up` leaves no half-started JVM behind. It also takes
  a lease (stack.leases) on each local server, saying this process uses it. With security on
  it creates the principals' Cassandra roles (stack/security.py); their rights on a journal
  are given above the stack (app/provision.py).
- `down()` stops the servers cleanly (SIGTERM, then SIGKILL after a timeout), in parallel;
  `down(only_started=True)` stops only what this `Stack` object started (a test session
  must not stop a stack the developer brought up), after waiting (bounded) for other
  processes that still hold a lease on it. External servers are never stopped.
- `kafka` and `cassandra` are the server objects, for fault tests that stop, restart or
  kill one server while the other keeps running. With KJ_KAFKA_BROKERS=3, `kafka` is a
  `KafkaCluster` (stack/kafka.py) whose `nodes` can be killed one at a time; with
  KJ_CASSANDRA_NODES=3, `cassandra` is a `CassandraCluster` (stack/cassandra.py) likewise.
  `spark` is the Spark standalone master and worker (stack/spark.py) with
  KJ_SPARK=standalone, else empty; they come up with the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from kjconfig.access import CassandraLogin, ClientTls, KafkaAccess
from stack import leases
from stack.cassandra import CassandraCluster, CassandraServer, refuse_unsupported
from stack.errors import StackError
from stack.health import cassandra_release_version, kafka_metadata
from stack.kafka import KafkaCluster, KafkaServer
from stack.progress import Progress, print_progress
from stack.security import ensure_cassandra_roles
from stack.server import ExternalServer, JvmServer, NodeCluster, Server, ServerStatus
from stack.settings import StackSettings
from stack.spark import spark_servers
from stack.tls import ensure_certificates


def _external_kafka(kafka: KafkaAccess, progress: Progress) -> ExternalServer:
    def probe(timeout: float) -> str | None:
        kafka_metadata(kafka, timeout)
        return None

    return ExternalServer("kafka", kafka.bootstrap, probe, progress=progress)


def _external_cassandra(
    hosts: list[str],
    port: int,
    login: CassandraLogin | None,
    tls: ClientTls | None,
    progress: Progress,
) -> ExternalServer:
    def probe(timeout: float) -> str | None:
        return cassandra_release_version(hosts, port, timeout, login, tls)

    address = ",".join(f"{host}:{port}" for host in hosts)
    return ExternalServer("cassandra", address, probe, progress=progress)


def _in_parallel(servers: list[Server], action: Callable[[Server], None]) -> list[BaseException]:
    """Run `action` on every server at once; return the errors (all servers get their turn)."""
    if not servers:
        return []
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=len(servers), thread_name_prefix="stack") as pool:
        futures = [pool.submit(action, server) for server in servers]
        for future in futures:
            error = future.exception()
            if error is not None:
                errors.append(error)
    return errors


def _jvms(server: Server) -> tuple[JvmServer, ...]:
    """The child JVMs behind a server: itself, a cluster's nodes, or none (external, docker)."""
    if isinstance(server, JvmServer):
        return (server,)
    if isinstance(server, NodeCluster):
        return server.nodes
    return ()


class Stack:
    """Kafka + Cassandra for development, tests and the demo (see the module contract)."""

    def __init__(
        self,
        settings: StackSettings | None = None,
        *,
        progress: Progress = print_progress,
        tie_to_parent: bool = False,
    ) -> None:
        self.settings = StackSettings.from_env() if settings is None else settings
        self.progress = progress
        self._started: set[str] = set()
        s = self.settings
        if s.security == "on" and s.mode == "docker":
            raise StackError("KJ_SECURITY=on runs local servers (stack/security.py), not docker")
        if s.kafka_brokers > 1 and s.mode == "docker" and not s.kafka_external:
            raise StackError("KJ_KAFKA_BROKERS=3 runs local Kafka nodes, not docker")
        if s.cassandra_nodes > 1 and s.mode == "docker" and not s.cassandra_external:
            raise StackError("KJ_CASSANDRA_NODES=3 runs local Cassandra nodes, not docker")
        if not s.cassandra_external:
            refuse_unsupported(s)
        docker: tuple[Server, Server] | None = None
        if s.mode == "docker" and not (s.kafka_external and s.cassandra_external):
            from stack.docker import docker_servers  # testcontainers only when asked for

            docker = docker_servers(s, progress=progress, tie_to_parent=tie_to_parent)
        self.kafka: Server
        self.cassandra: Server
        if s.external_kafka_bootstrap is not None:
            self.kafka = _external_kafka(s.kafka_access, progress)
        elif docker is not None:
            self.kafka = docker[0]
        elif s.kafka_brokers > 1:
            self.kafka = KafkaCluster(s, progress=progress, tie_to_parent=tie_to_parent)
        else:
            self.kafka = KafkaServer(s, progress=progress, tie_to_parent=tie_to_parent)
        if s.external_cassandra_hosts is not None:
            self.cassandra = _external_cassandra(
                s.cassandra_hosts, s.cassandra_port, s.cassandra_login, s.client_tls, progress
            )
        elif docker is not None:
            self.cassandra = docker[1]
        elif s.cassandra_nodes > 1:
            self.cassandra = CassandraCluster(s, progress=progress, tie_to_parent=tie_to_parent)
        else:
            self.cassandra = CassandraServer(s, progress=progress, tie_to_parent=tie_to_parent)
        self.spark = spark_servers(s, progress=progress, tie_to_parent=tie_to_parent)

    @property
    def servers(self) -> tuple[Server, ...]:
        return self.kafka, self.cassandra, *self.spark

    @property
    def kafka_bootstrap(self) -> str:
        return self.settings.kafka_bootstrap

    @property
    def cassandra_hosts(self) -> list[str]:
        return self.settings.cassandra_hosts

    @property
    def cassandra_port(self) -> int:
        return self.settings.cassandra_port

    @property
    def local(self) -> bool:
        """Whether both servers are this stack's own JVMs (not containers, not external)."""
        return all(_jvms(server) for server in self.servers)

    @property
    def started(self) -> frozenset[str]:
        """Names of the servers this object started (and has not stopped since)."""
        return frozenset(self._started)

    def up(self, timeout: float | None = None) -> list[str]:
        """Make both servers healthy, starting what is missing; return the names started."""
        for server in self.servers:
            for jvm in _jvms(server):
                leases.take(jvm.home)
        s = self.settings
        if s.tls == "on" and not (s.kafka_external and s.cassandra_external):
            # before any server starts: they read these files (kept while valid: stack/tls.py)
            ensure_certificates(s.tls_dir)
        outcome: dict[str, bool | BaseException] = {}

        def bring_up(server: Server) -> None:
            if server.healthy():
                self.progress(f"{server.name}: already up, reusing it")
                outcome[server.name] = False
                return
            outcome[server.name] = server.start(timeout)

        errors = _in_parallel(list(self.servers), bring_up)
        launched = [s for s in self.servers if outcome.get(s.name) is True]
        if errors:
            for error in _in_parallel(launched, lambda server: server.stop()):
                self.progress(f"while cleaning up: {error}")
            self._release(self.servers)
            raise errors[0]
        for server in self.servers:
            if server not in launched:
                self._untie(server)
        self._started.update(server.name for server in launched)
        if self.settings.security == "on" and self.local:
            self.progress("security on: Cassandra roles")
            # idempotent: also for servers reused
            ensure_cassandra_roles(
                self.settings.cassandra_hosts,
                self.settings.cassandra_port,
                self.settings.client_tls,
            )
        elif self.settings.security == "on":  # someone else's servers: their admin grants
            self.progress("security on with external servers: their administrator grants rights")
        return [server.name for server in launched]

    @staticmethod
    def _untie(server: Server) -> None:
        """A server this Stack did not start must outlive it, even once a fault test restarts it."""
        for jvm in _jvms(server):
            jvm.tie_to_parent = False

    @staticmethod
    def _release(servers: Iterable[Server]) -> None:
        for server in servers:
            for jvm in _jvms(server):
                leases.drop(jvm.home)

    def down(self, *, only_started: bool = False, wait_for_others: float = 0.0) -> None:
        """Stop the servers (or only those this object started); external ones are left.

        With `only_started`, this process first gives up its use of the servers it did not
        start, then waits up to `wait_for_others` seconds for other processes (test sessions
        that reused a server this one started) to finish with it, and stops it anyway after.
        """
        targets = [
            server
            for server in self.servers
            if server.controllable and (not only_started or server.name in self._started)
        ]
        self._release(s for s in self.servers if s not in targets)

        def shut(server: Server) -> None:
            if only_started and wait_for_others > 0:
                for jvm in _jvms(server):
                    others = leases.holders(jvm.home)
                    if others:
                        self.progress(f"{jvm.label}: still used by pids {others}, waiting")
                        others = leases.wait_until_released(jvm.home, wait_for_others)
                    if others:
                        self.progress(f"{jvm.label}: stopping although pids {others} use it")
            server.stop()

        errors = _in_parallel(targets, shut)
        self._release(targets)
        self._started.difference_update(server.name for server in targets)
        if errors:
            raise StackError("; ".join(str(error) for error in errors))

    def status(self) -> list[ServerStatus]:
        return [server.status() for server in self.servers]
