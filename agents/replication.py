"""The replicating agent's work, batch by batch, per partition; it never raises.

For each batch of one partition, in offset order:
1. parse the records; a malformed one is copied to the quarantine topic (counted, logged);
2. fold the batch into the tables (watermark and head cache), one write per journal;
3. advance the partition's processed offset: readers waiting for their Mark may go on,
   the tables now describe every journal of the partition up to here;
4. replicate into the store. If the store fails, the partition enters catch-up: the agent
   keeps consuming (steps 1-3), and a background task replays the partition from the
   store's pointer through Kafka, with backoff, until it has caught up with the agent.

The store's pointer, not Faust's committed offset, says what is replicated: on the first
batch after an assignment, records between the pointer and that batch are caught up too, so a
commit that ran ahead of replication (kill -9, a store outage) loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.actions import RawRecord
from journal.metrics import METRICS
from journal.model import ActionRecord
from journal.progress import Progress
from journal.replicate import AlreadyQuarantined, Quarantine, Replicator, replicate_range
from journal.store.base import EventualStore
from tables.tables import JournalTables

log = logging.getLogger(__name__)

SetCurrent = Callable[[object], None]  # makes an event Faust's current event


@dataclass(slots=True)
class _Partition:
    pointer: int  # replicated up to here (store's pointer), -1 for nothing
    catch_up_from: int | None = None  # first offset not replicated while catching up
    task: asyncio.Task[None] | None = None


class ReplicationWork:
    """Everything the agent does with a batch; Faust-free apart from the events it is handed."""

    def __init__(
        self,
        topic: str,
        store: EventualStore,
        quarantine: Quarantine,
        tables: JournalTables,
        progress: Progress,
        bootstrap: str,
        max_backoff_s: float = 10.0,
    ) -> None:
        self._topic = topic
        self._store = store
        self._quarantine = quarantine
        self._tables = tables
        self._progress = progress
        self._replicator = Replicator(store, quarantine)
        # catching up replays records the agent has seen: quarantined once is enough
        self._replayer = Replicator(store, AlreadyQuarantined())
        self._bootstrap = bootstrap
        self._max_backoff_s = max_backoff_s
        self._partitions: dict[int, _Partition] = {}

    async def handle(
        self, partition: int, batch: Sequence[tuple[object, RawRecord]], set_current: SetCurrent
    ) -> None:
        """One partition's events with their raw records, in offset order."""
        if not batch:
            return
        state = await self._state(partition, batch[0][1].offset)
        events = {raw.offset: event for event, raw in batch}
        last = batch[-1][1]
        actions = await _retrying(lambda: self._replicator.parse([raw for _, raw in batch]))
        by_journal: dict[str, list[ActionRecord]] = defaultdict(list)
        for action in actions:
            by_journal[action.key.id].append(action)
        for journal_id, journal_actions in by_journal.items():
            set_current(events[journal_actions[-1].offset])
            self._tables.update(journal_id, journal_actions, state.pointer)
        await self._progress.advance(partition, last.offset)
        if state.catch_up_from is None:
            try:
                await self._replicator.store(actions, last)
                state.pointer = last.offset
                return
            except Exception as error:  # the store is down or failing: catch up later
                log.warning("replication of %s-%s failed: %r", self._topic, partition, error)
                METRICS.counter("journal_replication_failures_total").inc()
                state.catch_up_from = batch[0][1].offset
        self._ensure_catch_up(partition, state)

    async def revoke(self, partition: int) -> None:
        state = self._partitions.pop(partition, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        await self._progress.revoke(partition)

    async def close(self) -> None:
        for partition in list(self._partitions):
            await self.revoke(partition)

    async def _state(self, partition: int, first_offset: int) -> _Partition:
        state = self._partitions.get(partition)
        if state is None:
            pointer = await _retrying(lambda: self._store.pointer(self._topic, partition))
            state = _Partition(pointer=-1 if pointer is None else pointer)
            if state.pointer + 1 < first_offset:  # committed ahead of replication
                state.catch_up_from = state.pointer + 1
            self._partitions[partition] = state
        return state

    def _ensure_catch_up(self, partition: int, state: _Partition) -> None:
        if state.task is None or state.task.done():
            state.task = asyncio.create_task(self._catch_up(partition, state))

    async def _catch_up(self, partition: int, state: _Partition) -> None:
        """Replay [catch_up_from, processed] from Kafka until caught up with the agent."""
        tp = TopicPartition(self._topic, partition)
        backoff = 0.5
        while state.catch_up_from is not None:
            processed = self._progress.offset(partition)
            if processed is None:
                return  # revoked
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap, group_id=None, fetch_max_wait_ms=20
            )
            try:
                await consumer.start()
                start = state.catch_up_from
                await replicate_range(consumer, self._replayer, tp, start, processed + 1)
                state.pointer = max(state.pointer, processed)
                if self._progress.offset(partition) == processed:
                    state.catch_up_from = None  # no await since the check: the agent is here
                    log.info("%s caught up at %s", tp, processed)
                else:
                    state.catch_up_from = processed + 1
                backoff = 0.5
            except Exception as error:
                log.warning("catching up %s failed, again in %.1fs: %r", tp, backoff, error)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff_s)
            finally:
                await consumer.stop()


T = TypeVar("T")


async def _retrying(attempt: Callable[[], Awaitable[T]], max_backoff_s: float = 10.0) -> T:
    """Retry until it succeeds: the agent must never raise (Faust would ack and commit)."""
    backoff = 0.2
    while True:
        try:
            return await attempt()
        except Exception as error:
            log.warning("retrying in %.1fs after %r", backoff, error)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
