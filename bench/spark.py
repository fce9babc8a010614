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
from journal.settings import Settings

REPO = Path(__file__).resolve().parents[1]

METHOD = (
    "`python -m pipeline.bench --events {events} --master local[2]`: appends {events:,} events "
    "(appends of 10 over 200 journals) to a fresh topic with the direct client, then rebuilds "
    "them with Spark from the earliest offsets into a fresh keyspace (driver set-up and Spark "
    "job included); the same records are also replicated by the core's `replicate_to_now` in "
    "one process, the baseline."
)


async def bench_spark(settings: Settings, events: int, timeout_s: float = 600) -> Section:
    section = Section("Spark rebuild", METHOD.format(events=events))
    if not (REPO / "pipeline" / "bench.py").exists():
        section.add(
            Row(
                "rebuild: events/s",
                float("nan"),
                "events/s",
                note="not measured in this run: pipeline/bench.py is missing",
            )
        )
        return section
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
        command += ["--master", "local[2]", "--json", str(result_file)]
        return await _run(section, command, env, result_file, timeout_s)


async def _run(
    section: Section, command: list[str], env: dict[str, str], result_file: Path, timeout_s: float
) -> Section:
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
        section.add(
            Row(
                "rebuild: events/s",
                float("nan"),
                "events/s",
                note=f"not measured in this run: no result in {timeout_s:.0f} s",
            )
        )
        return section
    text = output.decode(errors="replace")
    result = _result(result_file) if process.returncode == 0 else None
    if result is None:
        tail = " / ".join(text.strip().splitlines()[-3:])[-300:]
        section.add(
            Row(
                "rebuild: events/s",
                float("nan"),
                "events/s",
                note=f"not measured in this run: exit {process.returncode}: {tail}",
            )
        )
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
    lines = [line for line in text.splitlines() if line.startswith("rebuild on")]
    section.notes.extend(lines[-1:])  # pipeline.bench's own summary line, for the reader
    return section


def _result(path: Path) -> dict[str, Any] | None:
    """pipeline.bench's JSON result (its module says the fields); None if it wrote none."""
    if not path.is_file():
        return None
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result
