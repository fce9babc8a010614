"""What one more partition costs (issue 40): a worker's memory and start-up, a rebalance, and a
direct client's memory and start-up, measured at several partition counts on fresh topics.

Each count gets a topic and keyspace of its own with one journal per partition (one event
each), so that every partition the worker owns has a record its agent handled and a table entry,
and every partition the client follows has a record. The cost of one more partition is the
slope of each measure over the counts (least squares), which is what the README's guidance for
choosing the count uses.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from os import environ
from pathlib import Path

from bench.common import Row, Section, unique
from bench.environment import settings_for
from bench.workload import events
from devtools.workers import REPO, WorkerProcess
from journal import Ack, Journals
from journal.kafka import partition_of
from journal.settings import Settings

METHOD = (
    "At each partition count: a fresh topic and keyspace, one journal of one event in every "
    "partition (written by the direct client), then a worker started alone (time from its "
    "process start to `/readyz` 200, and its resident memory then), then a second worker of "
    "the same group started (time from its start until both answer `/readyz` 200: the "
    "rebalance, the partitions' tables recovered), then a direct client in a process of its "
    "own (time to connect and read one journal of each partition, and its resident memory "
    "then). One more partition costs the slope of each measure over the counts (least "
    "squares). Workers are dynamic members (a stopped one hands its partitions over at once)."
)


@dataclass(frozen=True, slots=True)
class PartitionCosts:
    partitions: int
    worker_ready_s: float  # start to ready, alone
    worker_rss_mib: float  # at ready
    rebalance_s: float  # a second worker's start to both ready
    client_ready_s: float  # connect and a read of one journal per partition
    client_rss_mib: float


MEASURES = {  # the field, its name in the table, its unit
    "worker_ready_s": ("a worker's start to ready", "s"),
    "worker_rss_mib": ("a worker's memory at ready", "MiB"),
    "rebalance_s": ("a second worker's start to both ready", "s"),
    "client_ready_s": ("a direct client's connect and a read per partition", "s"),
    "client_rss_mib": ("a direct client's memory", "MiB"),
}


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ys over xs (at least two distinct xs)."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread_x = sum((x - mean_x) ** 2 for x in xs)
    if spread_x == 0:
        raise ValueError("a slope needs at least two distinct partition counts")
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread_x


def one_id_per_partition(prefix: str, partitions: int) -> list[str]:
    """A journal id for every partition, in partition order (ids found by the partitioner)."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < partitions:
        candidate = f"{prefix}-{n}"
        found.setdefault(partition_of(candidate, partitions), candidate)
        n += 1
    return [found[p] for p in range(partitions)]


# a client in a process of its own, so that its memory is its own: it prints its timings
_CLIENT = """
import asyncio, json, sys, time
from pathlib import Path
from journal import Journals
from journal.settings import Settings

async def main() -> None:
    settings = Settings.from_env()  # the bench's topic and keyspace, in the environment
    ids = json.loads(sys.argv[1])
    started = time.monotonic()
    journals = await Journals.connect(settings)
    for journal_id in ids:
        assert [e async for e in journals.journal(journal_id).read()], journal_id
    ready = time.monotonic() - started
    rss = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    await journals.close()
    print(json.dumps({"ready_s": ready, "rss_kib": rss}))

asyncio.run(main())
"""


async def measure(base: Settings, partitions: int, workdir: Path) -> PartitionCosts:
    settings = settings_for(base, f"partitions{partitions}", partitions=partitions)
    ids = one_id_per_partition(unique("p"), partitions)
    journals = await Journals.connect(settings)
    try:
        for journal_id in ids:
            await journals.journal(journal_id).append(events(1, 1), ack=Ack.KAFKA)
    finally:
        await journals.close()
    group = unique("partitions")
    first = WorkerProcess(settings, group, workdir / f"{partitions}-a", loglevel="warning")
    second = WorkerProcess(settings, group, workdir / f"{partitions}-b", loglevel="warning")
    try:
        started = time.monotonic()
        first.start()
        await first.wait_ready(timeout_s=600)
        worker_ready = time.monotonic() - started
        worker_rss = first.memory_kib()["VmRSS"] / 1024
        started = time.monotonic()
        second.start()
        await second.wait_ready(timeout_s=600)
        await first.wait_ready(timeout_s=600)
        rebalance = time.monotonic() - started
    finally:
        second.stop()
        first.stop()
    client = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _CLIENT, json.dumps(ids)],
        cwd=REPO,
        env=environ
        | {
            "KJ_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
            "KJ_CASSANDRA_HOSTS": settings.cassandra_hosts,
            "KJ_CASSANDRA_PORT": str(settings.cassandra_port),
            "KJ_TOPIC": settings.topic,
            "KJ_KEYSPACE": settings.keyspace,
            "KJ_PARTITIONS": str(partitions),
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    answer = json.loads(client.stdout.strip().splitlines()[-1])
    return PartitionCosts(
        partitions=partitions,
        worker_ready_s=worker_ready,
        worker_rss_mib=worker_rss,
        rebalance_s=rebalance,
        client_ready_s=answer["ready_s"],
        client_rss_mib=answer["rss_kib"] / 1024,
    )


def section_of(costs: Sequence[PartitionCosts]) -> Section:
    """The table: every measure at every count, then one more partition's cost of each."""
    section = Section("What a partition costs", METHOD)
    counts = [c.partitions for c in costs]
    for field, (name, unit) in MEASURES.items():
        values = [getattr(c, field) for c in costs]
        for count, value in zip(counts, values, strict=True):
            section.add(Row(f"{name}, {count} partitions", value, unit))
        per = slope(counts, values)
        scale, shown = (1000.0, "ms") if unit == "s" else (1.0, unit)
        section.add(Row(f"{name}: one more partition", per * scale, shown))
    return section


async def bench_partitions(base: Settings, counts: Sequence[int], workdir: Path) -> Section:
    return section_of([await measure(base, count, workdir) for count in counts])
