"""The purge of expired journals, by the worker that owns their partition.

Every second, for each owned partition, `Expirer.tick` asks the expiry index
(`tables/expiry.py`) which journals' deadlines passed. Before it purges them it makes sure the
agent has handled every record of the partition written so far (its fence): an Append that came
before the deadline moved it, and a Purge produced by an earlier tick cleared it. Then it
produces one Purge per journal through the journal writer, with origin `expired`, so every
reader, the replication into the store and the tables see the same Purge in the log. An Append
that races its journal's deadline (written between that check and the Purge) goes with the
journal, as in kafka-journal.

Nothing here waits on a rebalance: while the group rebalances (the tables recovering) ticks do
nothing, and a partition that comes back has its window loaded again from its table.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from journal.core.model import JournalKey, Position
from journal.kafka.fence import Fence
from journal.metrics import METRICS
from tables.expiry import ExpiryIndex
from tables.partitions import OwnedPartitions

log = logging.getLogger(__name__)

EXPIRED_ORIGIN = "expired"  # the origin of the Purges produced here: why the journal went
TICK_S = 1.0
PURGES_AT_ONCE = 64  # Purges in flight together, per partition


class Purges(Protocol):
    """Where Purges are produced (the journal writer)."""

    async def purge(self, key: JournalKey, *, origin: str | None = None) -> Position: ...


class Expirer:
    def __init__(
        self,
        topic: str,
        index: ExpiryIndex,
        owned: OwnedPartitions,
        purges: Purges,
        fence: Fence,
        settled: Callable[[], bool],
        wait_s: float,
    ) -> None:
        """`settled`: whether the tables are recovered (no rebalance under way); `wait_s`: how
        long a tick waits for the agent to reach a partition's fence."""
        self._topic = topic
        self._index = index
        self._owned = owned
        self._purges = purges
        self._fence = fence
        self._settled = settled
        self._wait_s = wait_s
        self._expired = METRICS.counter("kafka_journal_journals_expired_total")

    async def run(self, tick_s: float = TICK_S) -> None:
        """Tick until cancelled; a failed tick (Kafka unreachable) is logged and tried again."""
        while True:
            await asyncio.sleep(tick_s)
            try:
                await self.tick()
            except Exception as error:
                log.warning("purging expired journals failed, again in %.0fs: %r", tick_s, error)

    async def tick(self, now_ms: int | None = None) -> int:
        """Purge what is due in every owned partition; how many journals were purged."""
        purged = 0
        for partition in self._owned.partitions():
            if not self._settled():
                break
            at = int(time.time() * 1000) if now_ms is None else now_ms
            purged += await self._partition(partition, at)
        return purged

    async def _partition(self, partition: int, now_ms: int) -> int:
        due = self._index.due(partition, now_ms)
        if not due:
            return 0
        end = await self._fence.fence(JournalKey(self._topic, due[0]), partition)
        if not await self._owned.wait_for(partition, end - 1, self._wait_s):
            return 0  # the agent is behind, or the partition went: a later tick
        if not self._settled() or not self._owned.owns(partition):
            return 0
        due = self._index.due(partition, now_ms)  # what the agent saw up to the fence says
        for start in range(0, len(due), PURGES_AT_ONCE):
            await asyncio.gather(
                *(self._purge(partition, id_) for id_ in due[start : start + PURGES_AT_ONCE])
            )
        return len(due)

    async def _purge(self, partition: int, journal_id: str) -> None:
        position = await self._purges.purge(
            JournalKey(self._topic, journal_id), origin=EXPIRED_ORIGIN
        )
        self._index.purged(partition, journal_id)
        self._expired.inc()
        log.info("journal %s expired: purged at %s", journal_id, position)
