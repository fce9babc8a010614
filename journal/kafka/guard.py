"""The partition count guard (issue 40): a journal lives in the partition its key maps to
under the topic's partition count (`partition_of`, journal/kafka/writer.py), so every process,
for ever, must map keys with the same count. Kafka lets an administrator add partitions
(`kafka-topics --alter`); a process that then mapped with the new count would put a journal's
next records on another partition than its earlier ones (two histories, offsets of different
partitions compared, appends lost). So:

- The count is recorded in the keyspace (`topic_partitions`, journal/store/schema.py) by the
  first process that starts on the topic, idempotently (`EventualStore.recorded_partitions`).
- At start a process compares the topic's live count (`ensure_topic`) with the record
  (`confirm`); a difference is `PartitionCountChanged`, raised at start. With the store
  unreachable at start, the record is compared once it is reached (`confirm_when_reached`);
  meanwhile the process maps with the count it found, and the next check holds it to it.
- Running, every append and read asks `check`, which compares the count in the producer's
  metadata (a set aiokafka keeps in memory, refreshed every `kafka_metadata_max_age_s` and
  after errors) with the process's count: a dictionary lookup. A worker's consumer, assigned
  a partition beyond the count, trips it too (`seen`).
- Tripped, it stays so (Kafka cannot take partitions away): the process refuses to produce or
  serve on the topic, logs the one error once, and `refusal` tells readiness why. Nothing is
  produced after a refusal, and nothing before it went to a partition other than the key's
  under the recorded count: the writer maps with that count, never with the live one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from journal.errors import PartitionCountChanged, StoreUnavailable
from journal.store.base import EventualStore

log = logging.getLogger(__name__)

_CONFIRM_BACKOFF_MAX_S = 5.0  # between looks at a store not reached yet


def _unknown() -> int | None:
    return None


async def check_recorded(store: EventualStore, topic: str, partitions: int) -> None:
    """At a process's start: PartitionCountChanged if the keyspace recorded another count for
    `topic` than `partitions`, its live one (recorded first if none is)."""
    guard = PartitionGuard(topic, partitions)
    await guard.confirm(store)
    guard.check()


class PartitionGuard:
    """Holds a process to `partitions`, the count it maps keys with, for `topic`. `live`: the
    topic's count as the process's Kafka metadata has it now (None: not known yet)."""

    def __init__(
        self, topic: str, partitions: int, live: Callable[[], int | None] = _unknown
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self._live = live
        self._tripped: tuple[int, int] | None = None  # (live, recorded)
        self._unrecorded_logged = False

    @property
    def refusal(self) -> PartitionCountChanged | None:
        """Why the topic is refused, or None while it is not."""
        if self._tripped is None:
            self._look()
        return None if self._tripped is None else PartitionCountChanged(self.topic, *self._tripped)

    def check(self) -> None:
        """PartitionCountChanged if the topic is refused (before any append or read)."""
        if self._tripped is None:
            self._look()
            if self._tripped is None:
                return
        raise PartitionCountChanged(self.topic, *self._tripped)

    def seen(self, live: int) -> None:
        """A count of the topic seen elsewhere (a consumer's assignment, a describe)."""
        if live != self.partitions:
            self._trip(live, self.partitions)

    async def confirm(self, store: EventualStore, *, announce: bool = False) -> None:
        """Compare this process's count with the record, recording it if there is none;
        StoreUnavailable if the store cannot tell now. The caller `check`s after it (at start:
        raised there, so logged only if `announce`)."""
        recorded = await store.recorded_partitions(self.topic, self.partitions)
        if recorded is None:
            if not self._unrecorded_logged:
                self._unrecorded_logged = True
                log.warning(
                    "the keyspace has no topic_partitions table (created by an earlier "
                    "version): topic %s is guarded against a change seen while this process "
                    "runs only; an administrator upgrades the keyspace (kafka-journal stack up "
                    "or the provisioning of the secured stack creates it)",
                    self.topic,
                )
        elif recorded != self.partitions:
            self._trip(self.partitions, recorded, announce)

    async def confirm_when_reached(self, store: EventualStore) -> None:
        """`confirm`, trying again until the store is reached (a task's body: cancel it to
        stop)."""
        backoff = 0.2
        while True:
            try:
                await self.confirm(store, announce=True)
                return
            except StoreUnavailable:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _CONFIRM_BACKOFF_MAX_S)

    def _look(self) -> None:
        live = self._live()
        if live is not None and live != self.partitions:
            self._trip(live, self.partitions)

    def _trip(self, live: int, recorded: int, announce: bool = True) -> None:
        if self._tripped is None:
            self._tripped = (live, recorded)
            if announce:  # once: every later refusal repeats it to its caller
                log.error("%s", PartitionCountChanged(self.topic, live, recorded))
