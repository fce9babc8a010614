"""Rebuild throughput: events per second the Spark rebuild writes into a fresh keyspace.

Contract: `rebuild_throughput(spark, settings, ...)` appends `events` events (JSON payloads
of about 100 bytes, `per_append` per Append, spread over `journals` journals) with the direct
client to a fresh topic named after `settings.topic`, then rebuilds them from the earliest
offsets into a fresh keyspace, `rounds` times (each into its own keyspace), and returns the
seconds of each rebuild (driver set-up and Spark job included: what an operator waits for;
the first round of a fresh session also pays Spark's warm-up, later rounds do not). With
`compare=True` it also times the core's `replicate_to_now` (one process, no Spark) on the
same records.

Run it against a running stack: `python -m pipeline.bench --events 50000 --master local[2]`.
It prints a line of the result; with `--json PATH` it also writes the result there as JSON
(`events`, `records`, `rebuild_seconds`: a list, one per round, `core_seconds`: null when not
compared), what another program reads (bench/spark.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from journal import Event, Journals, JsonPayload
from journal.replication import AlreadyQuarantined, replicate_to_now
from journal.settings import Settings
from journal.store import CassandraStore
from pipeline.rebuild import rebuild
from pipeline.report import Progress, print_progress
from pipeline.session import SparkOptions, spark_session


@dataclass(frozen=True, slots=True)
class Throughput:
    events: int
    records: int
    rebuild_seconds: list[float]  # one per round
    core_seconds: float | None  # replicate_to_now on the same records, if compared

    @property
    def rebuild_events_per_second(self) -> list[float]:
        return [self.events / seconds for seconds in self.rebuild_seconds]

    @property
    def core_events_per_second(self) -> float | None:
        return None if self.core_seconds is None else self.events / self.core_seconds


async def write_events(
    settings: Settings, events: int, journals: int, per_append: int, concurrency: int = 64
) -> int:
    """Append `events` events to `settings.topic`; the number of Appends written."""
    client = await Journals.connect(settings)
    try:
        appends = [(i % journals, i // journals) for i in range(-(-events // per_append))]
        semaphore = asyncio.Semaphore(concurrency)
        # appends of one journal must go in order: one writer per journal
        by_journal: dict[int, list[int]] = {}
        for journal, round_ in appends:
            by_journal.setdefault(journal, []).append(round_)

        async def write(journal: int, rounds: list[int]) -> None:
            handle = client.journal(f"bench-{journal}")
            for round_ in rounds:
                first = round_ * per_append + 1
                batch = [
                    Event(n, frozenset({"bench"}), JsonPayload.of({"n": n, "pad": "x" * 64}))
                    for n in range(first, first + per_append)
                ]
                async with semaphore:
                    await handle.append(batch)

        await asyncio.gather(*(write(j, rounds) for j, rounds in by_journal.items()))
        return len(appends)
    finally:
        await client.close()


async def rebuild_throughput(
    spark: SparkSession,
    settings: Settings,
    events: int = 50_000,
    journals: int = 200,
    per_append: int = 10,
    compare: bool = True,
    rounds: int = 1,
    progress: Progress = print_progress,
) -> Throughput:
    """See the module contract."""
    run = uuid.uuid4().hex[:8]
    source = settings.replace(topic=f"{settings.topic}_bench_{run}")
    progress(f"writing {events} events to {source.topic}")
    started = time.monotonic()
    records = await write_events(source, events, journals, per_append)
    progress(f"wrote {records} appends in {time.monotonic() - started:.1f} s")
    seconds = []
    for round_ in range(rounds):
        target = source.replace(keyspace=f"bench_{run}_spark{round_}")
        seconds.append((await rebuild(spark, target, "earliest", progress=progress)).seconds)
    written = records * per_append
    core_seconds = None
    if compare:
        core = source.replace(keyspace=f"bench_{run}_core")
        store = await CassandraStore.connect(core.cassandra_config())
        try:
            started = time.monotonic()
            await replicate_to_now(core.kafka_access(), store, core.topic, AlreadyQuarantined())
            core_seconds = time.monotonic() - started
        finally:
            await store.close()
    return Throughput(written, records, seconds, core_seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--journals", type=int, default=200)
    parser.add_argument("--per-append", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=1, help="rebuilds in one session")
    parser.add_argument("--no-compare", action="store_true", help="skip replicate_to_now")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    spark = spark_session(SparkOptions(master=args.master, shuffle_partitions=4), print_progress)
    try:
        result = asyncio.run(
            rebuild_throughput(
                spark,
                Settings.from_env(),
                args.events,
                args.journals,
                args.per_append,
                compare=not args.no_compare,
                rounds=args.rounds,
            )
        )
    finally:
        spark.stop()
    rounds = ", ".join(
        f"{s:.1f} s = {r:.0f} events/s"
        for s, r in zip(result.rebuild_seconds, result.rebuild_events_per_second, strict=True)
    )
    line = f"rebuild on {args.master}: {result.events} events ({result.records} records): {rounds}"
    if result.core_seconds is not None:
        line += (
            f"; core replicate_to_now: {result.core_seconds:.1f} s = "
            f"{result.core_events_per_second:.0f} events/s"
        )
    print(line)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
