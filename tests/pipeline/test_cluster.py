"""`kafka-journal pipeline rebuild|audit --master spark://...` on a Spark standalone cluster.

The cluster (one master, one worker of one core) runs in a tmp dir on free ports, started and
stopped by stack/spark.py as `kafka-journal stack up` does with KJ_SPARK=standalone. The
commands run as their own programs: a process has one SparkContext, and the other pipeline
tests' session is local[2]. A small workload, replicated by the core's routine into keyspace A,
is rebuilt on the cluster into keyspace B (the same rows) and audited there (no difference).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.workers import free_port
from journal.settings import Settings
from stack import Stack, StackSettings
from stack.spark import SparkMaster, SparkWorker, master_state
from tests.pipeline.rows import TABLES, rows
from tests.pipeline.workload import write_malformed, write_workload
from tests.support.harness import harness, unique

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackSettings]:
    """A master and a worker of our own (`spark_master_url`)."""
    settings = StackSettings.from_env().replace(
        data_dir=tmp_path_factory.mktemp("spark"),
        spark="standalone",
        spark_master_port=free_port(),
        spark_webui_port=free_port(),
        spark_worker_port=free_port(),
        spark_worker_webui_port=free_port(),
        spark_worker_cores=1,
    )
    master = SparkMaster(settings, tie_to_parent=True)
    worker = SparkWorker(settings, tie_to_parent=True)
    try:
        master.start()
        worker.start()
        yield settings
    finally:
        worker.stop()
        master.stop()


async def pipeline(command: str, master: str, settings: Settings, *more: str) -> str:
    """Run `kafka-journal pipeline <command>` on `settings`; its stdout, after exit code 0."""
    flags = {
        "--kafka-bootstrap": settings.kafka_bootstrap,
        "--cassandra-hosts": settings.cassandra_hosts,
        "--cassandra-port": str(settings.cassandra_port),
        "--topic": settings.topic,
        "--keyspace": settings.keyspace,
        "--partitions": str(settings.partitions),
        "--segment-size": str(settings.segment_size),
    }
    argv = [sys.executable, "-m", "pipeline.commands", command, "--master", master]
    argv += ["--shuffle-partitions", "2"]  # one core: few tasks
    argv += [part for flag, value in flags.items() for part in (flag, value)]
    process = await asyncio.create_subprocess_exec(
        *argv, *more, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, (out + err).decode(errors="replace")[-4000:]
    return out.decode()


async def test_rebuild_and_audit_run_on_a_standalone_cluster(
    stack: Stack, cluster: StackSettings
) -> None:
    master = cluster.spark_master_url
    async with harness(stack, unique("pipe_cluster_a"), "pipe_cluster") as h:
        work = await write_workload(h.journals, seed=28, actions=40, journal_count=6)
        malformed = await write_malformed(h.producer, h.settings.topic)
        await h.replicate()
        rebuilt = h.settings.replace(keyspace=unique("pipe_cluster_b"))

        report = await pipeline("rebuild", master, rebuilt, "--from", "earliest")
        assert f"{malformed} malformed" in report
        for table in TABLES:
            a = await rows(h.store, h.settings.keyspace, table)
            assert a, table
            assert a == await rows(h.store, rebuilt.keyspace, table), table
        assert work.events > 50

        report = await pipeline("audit", master, rebuilt)
        assert report.startswith("audit: OK:"), report
    # Both ran on the cluster, not on a local master: it lists them, finished.
    apps = master_state(cluster, 5.0)["completedapps"]
    assert [(app["name"], app["state"]) for app in apps] == [("kafka-journal", "FINISHED")] * 2
