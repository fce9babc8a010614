"""The direct client's index: one tailing consumer per topic, keys only, bounded memory.

`TailIndex` assigns the partitions it follows to one consumer (no group): the direct client
follows each partition of the topic from the first time it is asked about it (`on_demand`: a
client that only appends with Kafka's acknowledgement never reads the log, which cost it ~15%
of its CPU per append when it followed every partition from the start), a worker the ones it
owns (the verdicts of its conditional appends: journal/client/conditional.py). From the
store's pointers on, it records for every record only its key and offset (`GrowingRuns` per
journal): it never decodes a header or a value. Every `prune_interval_s` it reads the store's
pointers. It keeps the runs replication covered too, so that with the store down a journal with
replicated history is read by its own records, until a partition holds more than
`kept_journals` journals: then it drops the runs replication covered, journal by journal in the
order it first saw them, down to that many (the journals emptied go). A partition it does not
follow is `NotIndexed`.

A read asks `lookup` after learning its fence: the index waits (bounded) until it has read the
partition up to the fence, then lists the journal's runs. Past `max_journals` journals in a
partition it stops adding new journals there, counts it, and answers `NotIndexed` for journals
it does not know until replication has covered every record it could not index.

A partition followed from offset 0 with nothing skipped (`_IndexedPartition.pruned_to_of`)
knows which journals are new: those it never held runs of. Their runs hold all their records,
so a read of one needs no store (`Indexed.complete`: the reading flow's Kafka-only path when
Cassandra is down). A prune forgets the journals it empties, so it remembers their ids in a
filter that ages (`ForgottenJournals`): two generations of Bloom filters, the older dropped
when the newer holds `forgotten_capacity` ids, so its false positives stay under 1% however
many journals pass through. Once a generation is dropped, a journal it does not know may be one
of those it held: every journal first seen from then on needs the store up to where the
dropped ones' records lay (`forgotten_to`), so with the store down it is refused (a prompt
503), never read incomplete.

Memory (docs/capacity.md): ~340-450 B per journal held with one run (its key, its runs, the
dict's slot), so ~3.4-4.4 MB per partition at the default `max_journals` (10,000), plus
2 x 150 KB of filter once the partition forgot a journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from hashlib import blake2b

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.core.index import GrowingRuns, IndexAnswer, Indexed, NotIndexed, OffsetRuns
from journal.core.model import JournalKey
from journal.core.waiters import OffsetWaiters
from journal.errors import StoreUnavailable
from journal.kafka import DEFAULT_TAIL_FORGOTTEN_CAPACITY, DEFAULT_TAIL_MAX_JOURNALS
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.driver_errors import POISON_ERRORS, KafkaError
from journal.kafka.poison import decodable_from, fetch
from journal.metrics import METRICS
from journal.store.base import EventualJournal
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TailConfig:
    kafka: KafkaAccess
    max_journals: int = DEFAULT_TAIL_MAX_JOURNALS  # per partition
    # per partition: past it a prune drops replicated runs (module doc); below max_journals,
    # so that replicated journals make room before new ones would go unindexed (None: 3/4 of
    # max_journals)
    kept_journals: int | None = None
    forgotten_capacity: int = DEFAULT_TAIL_FORGOTTEN_CAPACITY  # ids per filter generation
    wait_s: float = 5.0  # how long a read waits for the index to reach its fence
    prune_interval_s: float = 1.0
    # an idle partition's long poll: new records end it at once (the broker answers a waiting
    # fetch when the high watermark moves), so reads do not wait for it; 10 ms cost ~4% of a
    # core in polls alone, taken from every read's CPU
    fetch_max_wait_ms: int = 100

    @property
    def kept(self) -> int:
        return self.max_journals * 3 // 4 if self.kept_journals is None else self.kept_journals


class ForgottenJournals:
    """The ids of journals the index held runs of and dropped (pruned empty, or never indexed
    past `max_journals`): two generations of Bloom filters, never a false "no" for the ids
    they hold. Each holds up to `capacity` ids at 12 bits and 8 hashes an id (a false "yes"
    0.3% when full, so under 1% for the two); when the current one is full it becomes the
    previous one and the previous one is dropped (`add` says so: the caller then stops
    trusting that a journal it does not know is new). A false "yes" only makes a read need the
    store (or scan) where it need not."""

    BITS_PER_ID = 12
    _HASHES = 8

    __slots__ = ("_bits", "_capacity", "_count", "_current", "_previous")

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        # at least 1,024 bits: a filter of a few ids would hold its own false positives
        self._bits = max(capacity * self.BITS_PER_ID, 1024)
        self._current = bytearray((self._bits + 7) // 8)
        self._previous: bytearray | None = None
        self._count = 0  # ids added to `_current`

    def _positions(self, raw_key: bytes) -> list[int]:
        # double hashing from one 64-bit hash; blake2b, not hash(): bytes' hash() changes from
        # process to process (PYTHONHASHSEED), so a filter's false positives would too
        h = int.from_bytes(blake2b(raw_key, digest_size=8).digest(), "little")
        low, step, bits = h & 0xFFFF_FFFF, (h >> 32) | 1, self._bits
        return [(low + i * step) % bits for i in range(self._HASHES)]

    @staticmethod
    def _holds(filter_: bytearray, positions: list[int]) -> bool:
        return all(filter_[bit >> 3] & (1 << (bit & 7)) for bit in positions)

    def add(self, raw_key: bytes) -> bool:
        """Remember `raw_key`; True if that dropped the oldest generation."""
        positions = self._positions(raw_key)
        if self._holds(self._current, positions):
            return False  # held already: counting it again would age the filter sooner
        dropped = False
        if self._count >= self._capacity:
            dropped = self._previous is not None
            self._previous, self._current = self._current, bytearray(len(self._current))
            self._count = 0
        for bit in positions:
            self._current[bit >> 3] |= 1 << (bit & 7)
        self._count += 1
        return dropped

    def __contains__(self, raw_key: bytes) -> bool:
        positions = self._positions(raw_key)
        previous = self._previous
        return self._holds(self._current, positions) or (
            previous is not None and self._holds(previous, positions)
        )


@dataclass(slots=True)
class _IndexedPartition:
    """What the index knows of one partition it follows: each journal's runs, and how far."""

    start: int  # the offset the index started at
    journals: dict[bytes, GrowingRuns] = field(default_factory=dict)
    position: int = 0  # every record below it is indexed (or counted in `dropped_to`)
    pruned_to: int = -1  # replication covers every record up to here: the store has them
    dropped_to: int = -1  # records up to here were not indexed (past `max_journals`)
    poisoned_to: int = -1  # an undecodable batch ends here: nobody's runs are whole
    expired_to: int = -1  # records up to here left Kafka before they were indexed: ditto
    # lookups waiting for `position` to reach a fence (an event set on every move woke each
    # of the ~20 waiting per partition under 64 appends in flight)
    waiters: OffsetWaiters = field(default_factory=OffsetWaiters)
    followed: bool = True  # False once the partition is no longer followed
    forgotten: ForgottenJournals | None = None  # made when the first journal is dropped
    # the journals the filter dropped had no record above this: a journal it does not know
    # may be one of them, so a reader's store must reach this far (-1: nothing dropped)
    forgotten_to: int = -1

    def pruned_to_of(self, raw_key: bytes) -> int:
        """The `pruned_to` of a journal the partition holds no runs of: how far a reader's
        store must reach to hold its records that the index lacks. -1 (it has none) when the
        index saw every record from offset 0 and never dropped this journal (nor forgot that
        it did: `forgotten_to`); else as for a journal whose runs were pruned away, or up to
        the last record not indexed."""
        whole = self.start == 0 and self.expired_to == -1 and self.poisoned_to == -1
        if whole and (self.forgotten is None or raw_key not in self.forgotten):
            return self.forgotten_to
        return max(self.pruned_to, self.dropped_to)

    def moved_to(self, position: int) -> None:
        """Every record below `position` is indexed: the lookups waiting for it go on."""
        self.position = position
        self.waiters.reached(position)

    def unfollowed(self) -> None:
        """No longer followed: a lookup waiting for it misses at once."""
        self.followed = False
        self.waiters.miss_all()

    def forget(self, raw_key: bytes, capacity: int) -> None:
        if self.start != 0:
            return  # nothing is ever whole here: no need to remember
        if self.forgotten is None:
            self.forgotten = ForgottenJournals(capacity)
        if self.forgotten.add(raw_key):
            # the dropped generation's journals were dropped no later than now: their
            # records lie at or below what replication covered, or what went unindexed
            self.forgotten_to = max(self.pruned_to, self.dropped_to)
            METRICS.counter("kafka_journal_index_forgotten_generations_total").inc()


class TailIndex:
    """The `RecordIndex` of a process with no tables: see the module."""

    def __init__(self, topic: str, store: EventualJournal, config: TailConfig) -> None:
        self._topic = topic
        self._store = store
        self._config = config
        self._partitions: dict[int, _IndexedPartition] = {}
        self._following: frozenset[int] = frozenset()  # what `_tail` makes `_partitions` hold
        self._followed = asyncio.Event()  # `_following` changed
        self._assigned = asyncio.Event()  # pulsed when `_partitions` has become `_following`
        self._consumer: AIOKafkaConsumer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._on_demand: frozenset[int] = frozenset()  # followed once asked about

    @classmethod
    async def start(
        cls, topic: str, partitions: Iterable[int], store: EventualJournal, config: TailConfig
    ) -> TailIndex:
        """Start tailing `partitions` (numbers) from the store's pointers (the log start where
        there is none)."""
        index = cls(topic, store, config)
        consumer = await start_consumer(config.kafka, fetch_max_wait_ms=config.fetch_max_wait_ms)
        index._consumer = consumer
        try:
            index._following = frozenset(partitions)
            await index._assign(consumer)
        except BaseException:
            await stop_consumer(consumer)
            raise
        index._tasks = [asyncio.create_task(index._tail()), asyncio.create_task(index._prune())]
        return index

    @classmethod
    async def on_demand(
        cls, topic: str, partitions: Iterable[int], store: EventualJournal, config: TailConfig
    ) -> TailIndex:
        """An index that follows each of `partitions` from the first lookup that asks about it
        (from the store's pointer then, as `start`), and none before."""
        index = await cls.start(topic, (), store, config)
        index._on_demand = frozenset(partitions)
        return index

    def follow(self, partitions: Iterable[int]) -> None:
        """Follow these partitions from now on (a worker's, as they are assigned and revoked):
        one that is new starts at the store's pointer; until then it is `NotIndexed`."""
        following = frozenset(partitions)
        if following != self._following:
            self._following = following
            self._followed.set()

    async def _assign(self, consumer: AIOKafkaConsumer) -> None:
        """Make the consumer's assignment `_following`: the partitions kept go on from where
        they are, the new ones start at the store's pointers."""
        following = self._following
        self._followed.clear()  # a change from here on is applied next time
        for partition in set(self._partitions) - following:
            self._partitions.pop(partition).unfollowed()
        new = [TopicPartition(self._topic, p) for p in sorted(following - set(self._partitions))]
        try:
            pointers = await self._store.pointers(self._topic) if new else {}
        except StoreUnavailable:
            pointers = {}  # from the log start: the index then also serves reads without it
        try:
            starts = await consumer.beginning_offsets(new) if new else {}
        except BaseException:
            self._followed.set()  # not applied: again next time
            raise
        consumer.assign([TopicPartition(self._topic, p) for p in sorted(following)])
        for partition, state in self._partitions.items():  # assign() forgot their positions
            consumer.seek(TopicPartition(self._topic, partition), state.position)
        for tp in new:
            pointer = pointers.get(tp.partition, -1)
            start = max(pointer + 1, starts[tp])
            consumer.seek(tp, start)
            self._partitions[tp.partition] = _IndexedPartition(
                start, position=start, pruned_to=pointer, expired_to=start - 1
            )
        self._assigned.set()  # wakes every waiter; they look again
        self._assigned.clear()

    def covered(self, partition: int) -> int:
        state = self._partitions.get(partition)
        return -1 if state is None else state.pruned_to

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        state = await self._followed_state(partition)
        if state is None or (state.position < fence and not await self._reach(state, fence)):
            reason = "behind" if state is not None and state.followed else "unfollowed"
            METRICS.counter("kafka_journal_index_misses_total", reason=reason).inc()
            return NotIndexed(reason)
        if state.poisoned_to > state.pruned_to:
            METRICS.counter("kafka_journal_index_misses_total", reason="poison").inc()
            return NotIndexed("poison")
        if state.expired_to > state.pruned_to:
            METRICS.counter("kafka_journal_index_misses_total", reason="expired").inc()
            return NotIndexed("expired")
        raw_key = key.id.encode("utf-8")
        growing = state.journals.get(raw_key)
        runs = (
            OffsetRuns(pruned_to=state.pruned_to_of(raw_key))
            if growing is None
            else growing.frozen()
        )
        if runs.pruned_to > state.pruned_to:  # it may own records not indexed nor stored yet
            METRICS.counter("kafka_journal_index_misses_total", reason="overflow").inc()
            return NotIndexed("overflow")
        return Indexed(runs.runs, runs.pruned_to, runs.pruned_to == -1 and state.start == 0)

    async def unreplicated_ids(self, partition: int, fence: int) -> list[str] | None:
        """The ids of the partition's journals with records the store may lack, once the
        index reached `fence` (`journal.client.listing.UnreplicatedIds`); None where it
        cannot tell."""
        state = await self._followed_state(partition)
        if state is None or (state.position < fence and not await self._reach(state, fence)):
            return None
        if max(state.poisoned_to, state.expired_to, state.dropped_to) > state.pruned_to:
            return None  # records it did not index are not replicated yet
        pruned_to = state.pruned_to  # journals wholly replicated are kept too: not those
        return [
            key.decode("utf-8", "replace")
            for key, runs in list(state.journals.items())
            if runs.last > pruned_to
        ]

    async def _followed_state(self, partition: int) -> _IndexedPartition | None:
        """The partition's state; None if it is not followed (a `follow` naming it is waited
        for, bounded, until the tailing task has applied it)."""
        state = self._partitions.get(partition)
        if state is None and partition in self._on_demand and partition not in self._following:
            self.follow(self._following | {partition})
        if state is not None or partition not in self._following:
            return state  # no timeout to arm: the usual case
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._config.wait_s):
                while partition not in self._partitions and partition in self._following:
                    await self._assigned.wait()
        return self._partitions.get(partition)

    async def _reach(self, state: _IndexedPartition, fence: int) -> bool:
        """Whether the index reached `fence` in the partition, within `wait_s`."""
        if state.position >= fence or not state.followed:
            return state.followed
        return await state.waiters.wait(fence, self._config.wait_s)

    async def _tail(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        limit, forgotten = self._config.max_journals, self._config.forgotten_capacity
        dropped = METRICS.counter("kafka_journal_index_dropped_records_total")
        while True:
            try:
                if self._followed.is_set():
                    await self._assign(consumer)
                if not self._partitions:
                    await self._followed.wait()
                    continue
                batches = await consumer.getmany(timeout_ms=200)
            except POISON_ERRORS:
                batches = await self._past_poison(consumer)
            except KafkaError as error:  # the consumer reconnects by itself; keep asking
                log.warning("tail index: %r", error)
                await asyncio.sleep(0.5)
                continue
            for tp, messages in batches.items():
                state = self._partitions.get(tp.partition)
                if state is None:
                    continue  # no longer followed
                if messages and messages[0].offset > state.position:
                    await self._check_gap(consumer, tp, state, messages[0].offset)
                journals, replicated = state.journals, state.pruned_to
                for message in messages:
                    raw_key = message.key or b""
                    runs = journals.get(raw_key)
                    if runs is not None:
                        runs.add(message.offset, replicated)
                    elif len(journals) < limit:
                        runs = journals[raw_key] = GrowingRuns.empty(state.pruned_to_of(raw_key))
                        runs.add(message.offset)
                    else:
                        state.dropped_to = message.offset
                        state.forget(raw_key, forgotten)
                        dropped.inc()
            for partition, state in self._partitions.items():
                tp = TopicPartition(self._topic, partition)
                position = await consumer.position(tp)
                if position > state.position:
                    if tp not in batches:  # it moved with no record: maybe reset past expired
                        await self._check_gap(consumer, tp, state, position)
                    state.moved_to(position)

    async def _check_gap(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, state: _IndexedPartition, to: int
    ) -> None:
        """Offsets in [state.position, to) came with no record. Transaction markers do that
        harmlessly; retention does it when the consumer fell below the log start and reset
        (auto_offset_reset): those records were never indexed, so no journal's runs are
        whole until replication has gone past them (the reader's scan then says
        JournalTruncated where the journal needed them)."""
        try:
            log_start = (await consumer.beginning_offsets([tp]))[tp]
        except KafkaError:
            log_start = to  # cannot tell: assume the worst, a scan still answers right
        if log_start > state.position:
            state.expired_to = max(state.expired_to, min(log_start, to) - 1)
            METRICS.counter("kafka_journal_index_expired_records_total").inc(
                min(log_start, to) - state.position
            )

    async def _past_poison(
        self, consumer: AIOKafkaConsumer
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        """A fetch met a batch it cannot decode: fetch partition by partition, index what
        comes before the batch and go past it. Its records are not indexed (their keys are
        unknown), so the partition answers `NotIndexed` until replication has gone past the
        batch: the reader's scan meets the batch and says so (UndecodableBatch)."""
        fetched: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        for partition, state in self._partitions.items():
            tp = TopicPartition(self._topic, partition)
            end = consumer.highwater(tp) or state.position + 1
            got = await fetch(consumer, tp, timeout_ms=50, end=end)
            fetched[tp] = got.records
            if got.poison is not None:
                after = await decodable_from(consumer, tp, got.poison, end, timeout_ms=200)
                state.poisoned_to = max(state.poisoned_to, after - 1)
        return fetched

    async def _prune(self) -> None:
        while True:
            await asyncio.sleep(self._config.prune_interval_s)
            try:
                pointers = await self._store.pointers(self._topic)
            except StoreUnavailable:
                continue
            for partition, pointer in pointers.items():
                state = self._partitions.get(partition)
                if state is None or pointer <= state.pruned_to:
                    continue
                state.pruned_to = pointer
                if len(state.journals) > self._config.kept:
                    self._drop_replicated(state, pointer)

    def _drop_replicated(self, state: _IndexedPartition, pointer: int) -> None:
        """Drop the runs up to `pointer` of the journals first seen, down to `kept_journals`
        journals (or as far as replication allows): a journal with nothing left goes."""
        excess = len(state.journals) - self._config.kept
        journals = state.journals
        for raw_key, runs in list(journals.items()):
            if excess <= 0:
                break
            left = runs.after(pointer)
            if left is None:
                del journals[raw_key]  # room for others
                state.forget(raw_key, self._config.forgotten_capacity)
                excess -= 1
            elif left is not runs:
                journals[raw_key] = left

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._consumer is not None:
            await stop_consumer(self._consumer)
