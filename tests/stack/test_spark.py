"""Spark standalone servers of the stack (stack/spark.py): settings, command lines, status.
No server needed; the cluster itself runs in tests/pipeline/test_cluster.py."""

from __future__ import annotations

from pathlib import Path

from stack import Stack, StackSettings
from stack.cli import format_status
from stack.server import ServerStatus
from stack.spark import SparkMaster, SparkWorker, scala_version, spark_home, spark_servers


def settings(tmp_path: Path, **env: str) -> StackSettings:
    return StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path), **env})


def test_no_spark_unless_asked_for(tmp_path: Path) -> None:
    plain = settings(tmp_path)
    assert plain.spark == "none"
    assert spark_servers(plain) == ()
    assert [server.name for server in Stack(plain).servers] == ["kafka", "cassandra"]


def test_standalone_adds_a_master_and_a_worker_on_the_given_ports(tmp_path: Path) -> None:
    spark = settings(
        tmp_path,
        KJ_SPARK="standalone",
        KJ_SPARK_MASTER_PORT="19077",
        KJ_SPARK_WEBUI_PORT="19080",
        KJ_SPARK_WORKER_PORT="19078",
        KJ_SPARK_WORKER_WEBUI_PORT="19081",
        KJ_SPARK_WORKER_CORES="1",
        KJ_SPARK_WORKER_MEMORY="512m",
    )
    stack = Stack(spark)
    assert [server.name for server in stack.servers] == [
        "kafka",
        "cassandra",
        "spark-master",
        "spark-worker",
    ]
    master, worker = stack.spark
    assert isinstance(master, SparkMaster) and isinstance(worker, SparkWorker)
    assert master.address == spark.spark_master_url == "spark://127.0.0.1:19077"
    assert master.ports == {"master": 19077, "webui": 19080}
    assert worker.ports == {"worker": 19078, "webui": 19081}
    assert master.home == tmp_path / "spark-master"
    jars = master._jars()
    assert jars and all(jar.parent == spark_home() / "jars" for jar in jars)
    command = worker._command("java", jars)
    at = command.index("org.apache.spark.deploy.worker.Worker")
    assert command[at + 1] == "spark://127.0.0.1:19077"
    assert command[at + 2 :] == [
        "--host", "127.0.0.1", "--port", "19078", "--webui-port", "19081",
        "--cores", "1", "--memory", "512m", "--work-dir", str(tmp_path / "spark-worker" / "work"),
    ]  # fmt: skip
    assert "-Dspark.master.rest.enabled=false" in master._command("java", jars)


def test_the_workers_environment_points_at_pysparks_own_distribution(tmp_path: Path) -> None:
    env = SparkWorker(settings(tmp_path, KJ_SPARK="standalone"))._environment()
    assert env["SPARK_HOME"] == str(spark_home())
    assert env["SPARK_SCALA_VERSION"] == scala_version(spark_home()) == "2.13"
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert (Path(env["JAVA_HOME"]) / "bin" / "java").is_file()


def test_a_master_that_does_not_answer_is_not_healthy(tmp_path: Path) -> None:
    status = SparkMaster(
        settings(tmp_path, KJ_SPARK="standalone", KJ_SPARK_WEBUI_PORT="1")
    ).status()
    assert not status.healthy and status.pid is None
    assert status.detail is not None and "web UI http://127.0.0.1:1/json/" in status.detail


def test_status_shows_what_a_healthy_server_reports() -> None:
    healthy = ServerStatus("spark-master", "local", "spark://h:1", True, detail="1 worker alive")
    assert "  state     1 worker alive" in format_status(healthy)
    sick = ServerStatus("spark-master", "local", "spark://h:1", False, detail="no answer")
    assert "  why       no answer" in format_status(sick)
