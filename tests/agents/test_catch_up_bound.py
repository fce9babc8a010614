"""Catch-ups after an assignment are bounded in concurrency (issue 43): a rebalance that
brings many partitions opens at most `catch_up_concurrency` replays at once; the others wait
their turn, and every partition catches up in the end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agents.poison import SkippedBatches
from agents.replication import WorkerReplication
from journal.replication.replicate import Replicator
from tables.partitions import OwnedPartitions
from tables.tables import JournalTables
from tests.agents.memory import TOPIC, MemoryQuarantine, Store, Table, until

PARTITIONS = 6
BOUND = 2


class CountingReplay:
    """Empty partitions of 3 records' end, whose replays wait at `gate`, counting how many are
    open at once."""

    def __init__(self) -> None:
        self.open_now = 0
        self.most = 0
        self.done: set[int] = set()
        self.gate = asyncio.Event()

    @contextlib.asynccontextmanager
    async def open(self, partition: int) -> AsyncIterator[_Source]:
        self.open_now += 1
        self.most = max(self.most, self.open_now)
        try:
            await self.gate.wait()  # a consumer starting, fetching
            yield _Source(self, partition)
        finally:
            self.open_now -= 1


@dataclass(frozen=True, slots=True)
class _Source:
    replay: CountingReplay
    partition: int

    async def end(self) -> int:
        return 0  # nothing to replay: the bound is on the replays, not their records

    async def replicate(self, replicator: Replicator, start: int, end: int) -> None:
        self.replay.done.add(self.partition)

    async def committed(self) -> int | None:
        return None


async def test_a_rebalance_s_catch_ups_run_at_most_the_bound_at_once() -> None:
    quarantine = MemoryQuarantine()
    owned, replay = OwnedPartitions(), CountingReplay()
    work = WorkerReplication(
        TOPIC,
        Store(quarantine),
        quarantine,
        JournalTables(Table(), Table()),
        owned,
        replay,
        SkippedBatches(),
        catch_up_concurrency=BOUND,
    )
    try:
        for partition in range(PARTITIONS):  # one rebalance's assignment
            owned.assign(partition)
            work.assigned(partition)
        await until(lambda: replay.open_now >= BOUND, f"{BOUND} catch-ups open")
        replay.gate.set()
        await until(lambda: len(replay.done) == PARTITIONS, "every partition caught up")
        assert replay.most == BOUND
    finally:
        await work.close()
