"""Spark rebuild throughput, by `pipeline.bench` (its own process: its own JVM)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

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

_RESULT = re.compile(r"= (\d+) events/s(?:.*= (\d+) events/s)?")


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
    command = [sys.executable, "-m", "pipeline.bench", "--events", str(events)]
    command += ["--master", "local[2]"]
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
    lines = [line for line in text.splitlines() if line.startswith("rebuild on")]
    match = _RESULT.search(lines[-1]) if lines else None
    if process.returncode != 0 or match is None:
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
    rebuild = float(match.group(1))
    core = float(match.group(2)) if match.group(2) else None
    section.throughputs["Spark rebuild, local[2]"] = rebuild
    if core is not None:
        section.throughputs["replicate_to_now (1 process)"] = core
    section.add(Row("rebuild on local[2]: events/s", rebuild, "events/s", core))
    if core is not None:
        section.add(Row("replicate_to_now: events/s", core, "events/s"))
    section.notes.append(lines[-1])
    return section
