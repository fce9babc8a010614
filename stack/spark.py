"""A Spark standalone cluster, one master and one worker, as child JVMs (KJ_SPARK=standalone).

Contract: `spark_servers(settings)` gives the stack no server when `settings.spark` is "none",
else a `SparkMaster` (under `<data dir>/spark-master/`) and a `SparkWorker` (under
`<data dir>/spark-worker/`, its executors' directories and logs in `work/`). Each keeps its pid
file and its JVM's output, which is also its log, in `logs/<name>.out`. Both run the classes of
PySpark's own distribution (`pyspark/jars`), so the cluster runs the Spark of the pipeline's
driver. The master is ready when its web UI's JSON (`http://host:webui/json/`) says ALIVE; the
worker, once the master lists it ALIVE. The worker starts only once the master answers, so it
registers at its first attempt instead of after Spark's retry pause. `SparkMaster.status`
reports the master's URL and its alive workers.

Choices (and why):
- SPARK_HOME is the PySpark package: the worker builds its executors' classpath from its jars/.
  SPARK_SCALA_VERSION goes with it (Spark's launcher scripts export it; without it the worker
  looks for a source build's directories and fails every executor).
- SPARK_LOCAL_IP is the stack's host: the web UIs bind it, not every interface.
- JAVA_HOME is the stack's Java, which the worker also launches its executors with.
- The master's REST submission server is off: its fixed port (6066) would clash between two
  clusters on one machine, and nothing here submits through it.
- The daemons get a 256m heap: they only keep books; executors get the worker's memory.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from stack.errors import StackError
from stack.health import STATUS_PROBE_S, ProbeError, until_answered
from stack.jars import classpath_arg
from stack.java import find_java
from stack.progress import Progress, print_progress
from stack.server import JvmServer, Server, ServerStatus
from stack.settings import StackSettings

_DAEMON_HEAP = "256m"


def spark_home() -> Path:
    """The installed PySpark package, which ships Spark's jars."""
    spec = importlib.util.find_spec("pyspark")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise StackError("KJ_SPARK=standalone runs PySpark's own jars, and PySpark is missing")
    return Path(next(iter(spec.submodule_search_locations)))


def scala_version(home: Path) -> str:
    """The Scala version of Spark's jars, from spark-core's name (spark-core_2.13-4.3.0.jar)."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        return jar.name.removeprefix("spark-core_").partition("-")[0]
    raise StackError(f"no spark-core jar in {home / 'jars'}")


def master_state(settings: StackSettings, timeout: float) -> dict[str, Any]:
    """The master's state as its web UI serves it in JSON, or ProbeError."""
    url = f"http://{settings.host}:{settings.spark_webui_port}/json/"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            state: dict[str, Any] = json.load(response)
    except (OSError, ValueError) as error:  # URLError is an OSError; bad JSON a ValueError
        raise ProbeError(f"Spark master web UI {url}: {error}") from error
    if state.get("status") != "ALIVE":
        raise ProbeError(f"Spark master at {url} is {state.get('status')}")
    return state


class _SparkServer(JvmServer):
    accepted_java = (17,)  # the stack's one Java; Spark 4 runs on it
    stop_timeout = 30.0

    @property
    def version(self) -> str:
        return importlib.metadata.version("pyspark")

    @property
    def server_log(self) -> Path:
        return self.console_log  # Spark's default logging writes to stderr

    def _jars(self) -> list[Path]:
        return sorted((spark_home() / "jars").glob("*.jar"))

    def _environment(self) -> dict[str, str]:
        java = Path(find_java(self.settings.java, self.accepted_java)).resolve()
        home = spark_home()
        return os.environ | {
            "SPARK_HOME": str(home),
            "SPARK_SCALA_VERSION": scala_version(home),
            "SPARK_LOCAL_IP": self.settings.host,
            "JAVA_HOME": str(java.parents[1]),
        }

    def _configure(self) -> None:
        pass  # all settings are on the command line


class SparkMaster(_SparkServer):
    """The standalone master: schedules applications on the workers that register with it."""

    name = "spark-master"

    @property
    def address(self) -> str:
        return self.settings.spark_master_url

    @property
    def ports(self) -> dict[str, int]:
        return {"master": self.settings.spark_master_port, "webui": self.settings.spark_webui_port}

    def _command(self, java: str, jars: list[Path]) -> list[str]:
        del java
        s = self.settings
        return [
            f"-Xmx{_DAEMON_HEAP}", "-XX:+ExitOnOutOfMemoryError",
            "-Dspark.master.rest.enabled=false",
            "-cp", classpath_arg(jars), "org.apache.spark.deploy.master.Master",
            "--host", s.host, "--port", str(s.spark_master_port),
            "--webui-port", str(s.spark_webui_port),
        ]  # fmt: skip

    def _probe(self, timeout: float) -> str | None:
        state = master_state(self.settings, timeout)
        if state.get("url") != self.address:
            raise ProbeError(f"the web UI's master is {state.get('url')}, not {self.address}")
        return None

    def status(self) -> ServerStatus:
        status = super().status()
        if not status.healthy:
            return status
        try:
            state = master_state(self.settings, STATUS_PROBE_S)
        except ProbeError as error:
            return dataclasses.replace(status, healthy=False, detail=str(error))
        workers = state.get("aliveworkers", 0)
        return dataclasses.replace(
            status,
            detail=f"{workers} worker{'' if workers == 1 else 's'} alive, "
            f"{state.get('cores', 0)} cores, {state.get('memory', 0)} MiB",
        )


class SparkWorker(_SparkServer):
    """The one worker: launches the executors of the applications the master gives it."""

    name = "spark-worker"

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.settings.spark_worker_port}"

    @property
    def ports(self) -> dict[str, int]:
        return {
            "worker": self.settings.spark_worker_port,
            "webui": self.settings.spark_worker_webui_port,
        }

    def _command(self, java: str, jars: list[Path]) -> list[str]:
        del java
        s = self.settings
        return [
            f"-Xmx{_DAEMON_HEAP}", "-XX:+ExitOnOutOfMemoryError",
            "-cp", classpath_arg(jars), "org.apache.spark.deploy.worker.Worker",
            s.spark_master_url,
            "--host", s.host, "--port", str(s.spark_worker_port),
            "--webui-port", str(s.spark_worker_webui_port),
            "--cores", str(s.spark_worker_cores), "--memory", s.spark_worker_memory,
            "--work-dir", str(self.home / "work"),
        ]  # fmt: skip

    def _probe(self, timeout: float) -> str | None:
        workers = master_state(self.settings, timeout).get("workers", [])
        host, port = self.settings.host, self.settings.spark_worker_port
        if not any(
            w.get("host") == host and w.get("port") == port and w.get("state") == "ALIVE"
            for w in workers
        ):
            raise ProbeError(
                f"{self.settings.spark_master_url} lists no alive worker {host}:{port}"
            )
        return None

    def start(self, timeout: float | None = None) -> bool:
        """Wait for the master to answer (the worker registers at once then), then start."""
        within = self.settings.start_timeout if timeout is None else timeout
        try:
            until_answered(lambda: master_state(self.settings, 5.0), within)
        except ProbeError as error:
            raise StackError(f"{self.name}: its master does not answer: {error}") from error
        return super().start(timeout)


def spark_servers(
    settings: StackSettings, *, progress: Progress = print_progress, tie_to_parent: bool = False
) -> tuple[Server, ...]:
    """The cluster's servers, master first; none unless KJ_SPARK=standalone."""
    if settings.spark == "none":
        return ()
    return (
        SparkMaster(settings, progress=progress, tie_to_parent=tie_to_parent),
        SparkWorker(settings, progress=progress, tie_to_parent=tie_to_parent),
    )
