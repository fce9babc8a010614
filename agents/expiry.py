"""The purge of expired journals, by the worker that owns their partition.

Every second, for each owned partition, `Expirer.tick` asks the expiry index
(`tables/expiry.py`) which journals' candidate deadlines passed. It makes sure the agent has
handled every record of the partition written so far (its fence), then confirms each through
the reading flow as of that fence (`Deadlines`: the fold's last accepted Append, so a rejected
Append neither purges nor clears nor moves a deadline): a journal whose true deadline passed
gets one Purge through the journal writer, with origin `expired`, so every reader, the
replication into the store and the tables see the same Purge in the log; the others are settled
at their true deadline, or dropped. An Append that races its journal's deadline (written
between that read and the Purge) goes with the journal, as in kafka-journal.

Nothing here waits on a rebalance: while the group rebalances (the tables recovering) ticks do
nothing, and a partition that comes back has its window loaded again from its table.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from journal import JournalKey, Journals, Position
from journal.client import ReadingFlow
from journal.errors import JournalMoved, JournalMoving
from journal.kafka import Fence
from journal.metrics import METRICS
from tables.expiry import ExpiryIndex, deadline_of_event
from tables.partitions import OwnedPartitions

log = logging.getLogger(__name__)

EXPIRED_ORIGIN = "expired"  # the origin of the Purges produced here: why the journal went
TICK_S = 1.0
PURGES_AT_ONCE = 64  # Purges in flight together, per partition


class Purges(Protocol):
    """Where Purges are produced (the journal writer)."""

    async def purge(self, key: JournalKey, *, origin: str | None = None) -> Position: ...


class Deadlines(Protocol):
    """Where a journal's true deadline is read: the fold of its log up to `until`."""

    async def deadline(self, key: JournalKey, until: int) -> int | None: ...


class JournalDeadlines:
    """`Deadlines` through the client's reading flow, following a journal a grow moved."""

    def __init__(self, journals: Journals) -> None:
        self._journals = journals

    async def deadline(self, key: JournalKey, until: int) -> int | None:
        """The deadline the journal's last accepted Append set as of `until` (the record's time
        plus its last event's expireAfter); None for a journal that does not exist, whose last
        Append has none, or whose last event was deleted (nothing then tells it).

        A journal a grow moved (docs/growing.md: its partition cut below `until`) is read where
        it is now, along the chain of grows, as of now: its history there folds onto its state
        here, so its deadline is the one its last accepted Append set, in either topic."""
        return await _followed_deadline(self._journals, key, until)


async def _followed_deadline(journals: Journals, key: JournalKey, until: int | None) -> int | None:
    try:
        return await _deadline(journals.reading, key, until)
    except JournalMoved:
        if journals.growth is None:
            raise
        successor = await journals.growth.successor()
        return await _followed_deadline(successor, JournalKey(successor.topic, key.id), None)


async def _deadline(reading: ReadingFlow, key: JournalKey, until: int | None) -> int | None:
    head = await reading.head(key, until)
    last = head.state.seq_nr
    if last == 0:
        return None
    if head.events and head.events[-1].seq_nr == last:
        return deadline_of_event(head.events[-1])
    record = await reading.event(key, last)
    return None if record is None else deadline_of_event(record)


class JournalPurges:
    """`Purges` through the client's journals: a Purge of a journal a grow moved is redone
    where it is now (a Purge landing after its partition's cut has no effect there)."""

    def __init__(self, journals: Journals) -> None:
        self._journals = journals

    async def purge(self, key: JournalKey, *, origin: str | None = None) -> Position:
        return await self._journals.journal(key.id).purge(origin=origin)


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
        deadlines: Deadlines,
    ) -> None:
        """`settled`: whether the tables are recovered (no rebalance under way); `wait_s`: how
        long a tick waits for the agent to reach a partition's fence; `deadlines`: where a due
        candidate is confirmed."""
        self._topic = topic
        self._index = index
        self._owned = owned
        self._purges = purges
        self._deadlines = deadlines
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
        self._index.checking(partition, due)  # before the fence: the agent's later actions
        try:
            end = await self._fence.fence(JournalKey(self._topic, due[0]), partition)
            if not await self._owned.wait_for(partition, end - 1, self._wait_s):
                return 0  # the agent is behind, or the partition went: a later tick
            if not self._settled() or not self._owned.owns(partition):
                return 0
            checked = set(due)  # due since the fence: not covered by `checking`, a later tick
            due = [id_ for id_ in self._index.due(partition, now_ms) if id_ in checked]
            purged = 0
            for start in range(0, len(due), PURGES_AT_ONCE):
                chunk = due[start : start + PURGES_AT_ONCE]
                done = await asyncio.gather(
                    *(self._confirm(partition, id_, end - 1, now_ms) for id_ in chunk)
                )
                purged += sum(done)
            return purged
        finally:
            self._index.done(partition)

    async def _confirm(self, partition: int, journal_id: str, until: int, now_ms: int) -> bool:
        """Purge the journal if the fold's deadline passed, else settle it; whether purged."""
        try:
            at = await self._deadlines.deadline(JournalKey(self._topic, journal_id), until)
        except JournalMoving as error:
            # a moved journal's cut not learnt in time: the candidate stays due, for a later
            # tick, without holding up the others of its partition (any other failure still
            # ends the tick, as before)
            log.info("journal %s: its deadline not read, a later tick: %r", journal_id, error)
            return False
        if at is None or at > now_ms:
            self._index.settle(partition, journal_id, at)
            return False
        if not self._index.confirmed(partition, journal_id):
            return False  # the agent handled a candidate or Purge meanwhile: a later tick
        await self._purge(partition, journal_id)
        return True

    async def _purge(self, partition: int, journal_id: str) -> None:
        position = await self._purges.purge(
            JournalKey(self._topic, journal_id), origin=EXPIRED_ORIGIN
        )
        self._index.purged(partition, journal_id)
        self._expired.inc()
        log.info("journal %s expired: purged at %s", journal_id, position)
