"""Spark rebuild throughput, by `pipeline.bench` (its own process: its own JVM)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Row, Section
from devtools.workers import free_port
from journal.settings import Settings
from stack.settings import StackSettings
from stack.spark import SparkMaster, SparkWorker

REPO = Path(__file__).resolve().parents[1]

METHOD = (
    "`python -m pipeline.bench --events {events} --master local[2]`: appends {events:,} events "
    "(appends of 10 over 200 journals) to a fresh topic with the direct client, then rebuilds "
    "them with Spark from the earliest offsets into a fresh keyspace (driver set-up and Spark "
    "job included); the same records are also replicated by the core's `replicate_to_now` in "
    "one process, the baseline."
)


CLUSTER_METHOD = (
    "`python -m pipeline.bench --events {events} --no-compare`, once with `--master {master}` (a "
    "Spark standalone cluster, as `kafka-journal stack up` starts it with KJ_SPARK=standalone: "
    "one worker, executors in JVMs of their own) and once with `--master local[2]`, each on a "
    "fresh topic of its own: appends of 10 over 200 journals, rebuilt from the earliest offsets "
    "into a fresh keyspace (driver set-up and Spark job included)."
)


async def bench_spark(settings: Settings, events: int, timeout_s: float = 600) -> Section:
    section = Section("Spark rebuild", METHOD.format(events=events))
    result, text = await _measure(settings, events, "local[2]", timeout_s)
    if result is None:
        section.add(Row("rebuild: events/s", float("nan"), "events/s", note=text))
        return section
    done = result["events"]
    rebuild = done / result["rebuild_seconds"][0]
    core = None if result["core_seconds"] is None else done / result["core_seconds"]
    section.throughputs["Spark rebuild, local[2]"] = rebuild
    if core is not None:
        section.throughputs["replicate_to_now (1 process)"] = core
    section.add(Row("rebuild on local[2]: events/s", rebuild, "events/s", core))
    if core is not None:
        section.add(Row("replicate_to_now: events/s", core, "events/s"))
    if text:
        section.notes.append(text)  # pipeline.bench's own summary line, for the reader
    return section


async def bench_spark_cluster(
    settings: Settings, events: int, master: str, timeout_s: float = 600
) -> Section:
    """Rebuild events/s on the standalone cluster at `master` (e.g. `Stack().settings
    .spark_master_url` with KJ_SPARK=standalone), held against local[2] on as many events."""
    section = Section(
        "Spark rebuild on a standalone cluster",
        CLUSTER_METHOD.format(events=events, master=master),
    )
    rates: dict[str, float] = {}
    why: dict[str, str] = {}  # of a master measured without a result
    for on in ("local[2]", master):
        result, text = await _measure(settings, events, on, timeout_s, compare=False)
        if result is None:
            why[on] = text
            continue
        rates[on] = result["events"] / result["rebuild_seconds"][0]
        section.throughputs[f"Spark rebuild, {on}"] = rates[on]
        if text:
            section.notes.append(text)  # pipeline.bench's own summary line
    nan = float("nan")
    local = "local[2]"
    section.add(
        Row(
            f"rebuild on {master}: events/s",
            rates.get(master, nan),
            "events/s",
            rates.get(local),
            note=why.get(master, ""),
        )
    )
    section.add(
        Row(
            f"rebuild on {local}: events/s",
            rates.get(local, nan),
            "events/s",
            note=why.get(local, ""),
        )
    )
    return section


async def _measure(
    settings: Settings, events: int, master: str, timeout_s: float, *, compare: bool = True
) -> tuple[dict[str, Any] | None, str]:
    """pipeline.bench's result on `master` (in a process of its own: its own JVM) and its
    summary line; or None and why there is none (a note for the report)."""
    if not (REPO / "pipeline" / "bench.py").exists():
        return None, "not measured in this run: pipeline/bench.py is missing"
    env = {
        **os.environ,
        "KJ_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "KJ_CASSANDRA_HOSTS": settings.cassandra_hosts,
        "KJ_CASSANDRA_PORT": str(settings.cassandra_port),
        "KJ_TOPIC": settings.topic,
        "KJ_KEYSPACE": settings.keyspace,
    }
    with tempfile.TemporaryDirectory(prefix="kj-spark-bench-") as scratch:
        result_file = Path(scratch) / "result.json"
        command = [sys.executable, "-m", "pipeline.bench", "--events", str(events)]
        command += ["--master", master, "--json", str(result_file)]
        if not compare:
            command.append("--no-compare")
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            return None, f"not measured in this run: no result in {timeout_s:.0f} s"
        text = output.decode(errors="replace")
        result = _result(result_file) if process.returncode == 0 else None
    if result is None:
        tail = " / ".join(text.strip().splitlines()[-3:])[-300:]
        return None, f"not measured in this run: exit {process.returncode}: {tail}"
    lines = [line for line in text.splitlines() if line.startswith("rebuild on")]
    return result, (lines[-1] if lines else "")


def _result(path: Path) -> dict[str, Any] | None:
    """pipeline.bench's JSON result (its module says the fields); None if it wrote none."""
    if not path.is_file():
        return None
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


async def bench_spark_on_cluster(settings: Settings, events: int, workdir: Path) -> Section:
    """`bench_spark_cluster` on a standalone master and worker of the run's own (free ports,
    under `workdir`), stopped at the end."""
    cluster = StackSettings.from_env().replace(
        data_dir=workdir,
        spark="standalone",
        spark_master_port=free_port(),
        spark_webui_port=free_port(),
        spark_worker_port=free_port(),
        spark_worker_webui_port=free_port(),
    )
    master, worker = SparkMaster(cluster), SparkWorker(cluster)
    try:
        await asyncio.to_thread(master.start)
        await asyncio.to_thread(worker.start)
        return await bench_spark_cluster(settings, events, cluster.spark_master_url)
    finally:
        await asyncio.to_thread(worker.stop)
        await asyncio.to_thread(master.stop)
