"""A rebalance's pause (issue 43): how long replication stops when a second worker joins a
worker that owns every partition and whose tables hold many journals, measured as the
replication lag of appends paced through it, against the same load without a join."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import Row, Section, percentile, unique
from bench.environment import settings_for, settle
from bench.replication import Lags, lag
from bench.restore import fill_first_appends
from devtools.workers import DEFAULT_MEMBERSHIP, WorkerProcess
from journal import Journals
from journal.settings import Settings
from journal.store import CassandraStore

METHOD = (
    "A fresh topic of {partitions} partitions; a worker (static member, as the README starts "
    "it) indexes and replicates {journals:,} one-event Appends of as many journals, so its "
    "tables have entries to hand over. Then appends of 10 events are paced at {rate:,} "
    "events/s over 50 journals for {seconds:.0f} s with `Ack.KAFKA` (the lag: from each "
    "append's acknowledgement until its partition's pointer in the store covers it, pointers "
    "polled every 50 ms): once with the worker alone, then again with a second worker of the "
    "same group started {join_s:.0f} s in (it takes about half the partitions; their tables are "
    "restored and their replication caught up by the new owner), the appends going on until it "
    "has been ready {join_s:.0f} s. The pause: the longest lag with the join, against the "
    "longest without."
)
_GOAL_S = 5.0  # issue 43: a rebalance pauses replication no longer than 5 s


async def bench_rebalance(
    base: Settings,
    journals: int,
    workdir: Path,
    rate: int = 1000,
    seconds: float = 30.0,
    partitions: int = 8,
) -> Section:
    section = Section(
        "A rebalance's pause",
        METHOD.format(
            partitions=partitions, journals=journals, rate=rate, seconds=seconds, join_s=seconds / 4
        ),
    )
    settings = settings_for(base, "rebalance", partitions=partitions)
    app_id = unique("rebalance")

    def worker(name: str) -> WorkerProcess:
        return WorkerProcess(
            settings, app_id, workdir / name, instance_id=DEFAULT_MEMBERSHIP, loglevel="info"
        )

    first, second = worker("first"), worker("second")
    first.start()
    try:
        await first.wait_ready()
        await fill_first_appends(settings.kafka_access(), settings.topic, journals, partitions)
        store = await CassandraStore.connect(settings.cassandra_config())
        client = await Journals.connect(settings, store=store)
        try:
            # a million journals replicate at ~1,250 records/s even on a quiet host: the scale
            # benches' hour, not the default ten minutes
            await settle(settings, store, timeout_s=3600)
            pause = await measure_pause(client, store, second, rate, seconds)
        finally:
            await client.close()
            await store.close()
    finally:
        await asyncio.gather(asyncio.to_thread(second.stop), asyncio.to_thread(first.stop))
    add_pause_rows(section, pause)
    return section


@dataclass(frozen=True, slots=True)
class Pause:
    alone: Lags
    joined: Lags
    ready_s: float  # the second worker's start to /readyz


async def measure_pause(
    client: Journals, store: CassandraStore, second: WorkerProcess, rate: int, seconds: float
) -> Pause:
    """Replication's lag under paced appends with the running worker(s) alone, then again
    with `second` (of the same group, not started yet) started a quarter in, the appends going
    on until it has been ready a quarter of `seconds`; it is left running."""
    alone = await lag(client, store, rate, seconds)
    ready_at: list[float] = []

    async def join() -> float:
        await asyncio.sleep(seconds / 4)  # the join falls inside the paced load
        started = time.monotonic()
        second.start()
        await second.wait_ready()
        ready_at.append(time.monotonic())
        return ready_at[0] - started

    def longer() -> bool:
        # the load goes on until the new owner has been ready a quarter of `seconds`: a join
        # slower than the load (a start of ~26 s at load ~20) fell after its last append, and
        # its pause went unmeasured
        return not ready_at or time.monotonic() - ready_at[0] < seconds / 4

    joining = asyncio.create_task(join())
    joined = await lag(client, store, rate, seconds, longer)
    return Pause(alone, joined, await joining)


def add_pause_rows(section: Section, pause: Pause) -> None:
    """The lags alone and with the join, and the pause held to its goal."""
    for name, lags in (("alone", pause.alone), ("a second worker joining", pause.joined)):
        note = f"{lags.offered:,.0f} events/s offered"
        if lags.unreplicated:
            note += f", {lags.unreplicated} appends unreplicated at the end"
        section.add(Row(f"replication lag p50, {name}", percentile(lags.lags, 50), "ms"))
        section.add(Row(f"replication lag p99, {name}", percentile(lags.lags, 99), "ms"))
        section.add(Row(f"replication lag max, {name}", max(lags.lags), "ms", note=note))
    longest = max(pause.joined.lags) / 1000
    section.add(
        Row(
            "the pause: the longest lag with the join",
            longest,
            "s",
            baseline=max(pause.alone.lags) / 1000,
            goal=f"<= {_GOAL_S:.0f} s",
            met=longest <= _GOAL_S and not pause.joined.unreplicated,
            note=f"the second worker answered /readyz {pause.ready_s:.1f} s after its start",
        )
    )
