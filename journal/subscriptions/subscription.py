"""Subscriptions: every accepted event of a topic, each partition in log order, resumable.

A subscription reads each partition from a position on and delivers the events of the
Appends the fold accepted (`journal.core.fold`): never a rejected Append. It never decides a
verdict itself; it takes each one from one of two places:
- **Replicated records** (at or below the store's pointer): replication stored the accepted
  Appends in the store's `appends` table, by offset. Within Kafka's retention the records are
  read from Kafka and kept if the table lists them (one range query per window of offsets,
  the next window read ahead); beyond it, the table's Appends are read back from the store's
  events, in the same order.
- **The tail** (above the pointer): each journal's actions are folded with
  `JournalState.apply` onto the state of the journal's store row, read on first sight (or
  while the fetch before is delivered, where Kafka's consumer holds the next already). A row
  that already reflects a record (replication passed it meanwhile) defers to the table for
  that record. States are evicted once the pointer passes their journal's last record, so
  they are bounded by the unreplicated tail, like the tail index.
With the store down, a partition whose log still starts at offset 0 is folded from there with
no store at all (Kafka provably holds all of it); otherwise the subscription fails with
StoreUnavailable, and the client resumes from its last position later.

Positions: for every partition, the offset of the last record handled, and for an event
inside an Append (not its last) also how many of that Append's events are handled: the
position names the event, so resuming after it repeats none. A position travels as an opaque
string (`SubscriptionPosition.encode`); a client resumes after the last one it processed, so
delivery is at least once. A position of an earlier version (offsets only) is still read:
resuming inside an Append there delivers the whole Append again.

Deletes and Purges do not retract what was delivered: an Append is delivered as it came
(from Kafka), and events already deleted when read from the store are simply not there, as
are the Appends whose events a Delete or Purge wholly removed, once replication applied it
(the store's table no longer lists them: from Kafka too, such an Append is skipped).
Partitions have no common order: events of different partitions arrive interleaved as they
are read; within a partition (so within a journal) the order is the log's.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import OrderedDict
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Container,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Final, TypeAlias

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord
from msgspec.structs import replace

from journal.codec.actions import MalformedRecord, events_of, parse_checked
from journal.codec.envelope import (
    EnvelopeRefused,
    OpenedAppend,
    Opener,
    is_append_envelope,
    is_sealed,
)
from journal.core.fold import JournalState, Verdict
from journal.core.grow import SEAL_ID, Grow, Phase
from journal.core.model import ActionRecord, AppendHeader, BinaryPayload, EventRecord, JournalKey
from journal.errors import InvalidValue, JournalTruncated, KafkaUnavailable, StoreUnavailable
from journal.kafka.consumers import log_start, raw_record, start_consumer, stop_consumer
from journal.kafka.driver_errors import POISON_ERRORS, KafkaError, core_error
from journal.kafka.topic import end_offsets
from journal.metrics import METRICS
from journal.store.base import EventualJournal, JournalMeta, StoredAppend, moved_bases
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
_FETCH_RECORDS = 500  # records per fetch, all partitions together
_POINTER_REFRESH_S = 1.0  # how often the tail asks the pointer, to evict states
_LISTING_WINDOW = 1000  # offsets per query of the table of accepted Appends, read ahead


Offsets: TypeAlias = tuple[tuple[int, int], ...]  # (partition, offset), by partition
Fetched: TypeAlias = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]


class Unreadable:
    """A journal whose events a subscription passes by: its erasure began, or its data key is
    wrapped by a key-encryption key this process is not given."""


UNREADABLE: Final = Unreadable()
# what an encrypting deployment knows of a journal's payloads (docs/erasure.md): the `Opener`
# of its data key, None for a journal without one (its payloads plain), or UNREADABLE
Found: TypeAlias = Opener | Unreadable | None
# the look-up of journals' keys, by journal, through the process's cache (StoreUnavailable)
Openers: TypeAlias = Callable[[Collection[JournalKey]], Awaitable[Mapping[JournalKey, Found]]]
# an Append's events passed by, by its offset: their indices (none for most)
_Passing: TypeAlias = Mapping[int, Container[int]]
_NO_PASSING: _Passing = {}


def encode_token(text: str) -> str:
    """`text` as a position clients hand back: URL-safe base64, without padding."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_token(encoded: str) -> str:
    """The text `encode_token` encoded; ValueError for anything else (binascii.Error and
    UnicodeError are ValueErrors)."""
    padded = encoded + "=" * (-len(encoded) % 4)
    raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
    return raw.decode("ascii")


class SubscriptionPosition(msgspec.Struct, frozen=True, gc=False):
    """Per partition, the offset of the last record a subscriber has handled (-1: none);
    `inside`: per partition, how many events of the Append right after it are handled too."""

    offsets: Offsets = ()
    inside: Offsets = ()

    @classmethod
    def of(cls, offsets: Mapping[int, int]) -> SubscriptionPosition:
        return cls(tuple(sorted((p, o) for p, o in offsets.items() if o >= 0)))

    def offset(self, partition: int) -> int:
        for p, o in self.offsets:
            if p == partition:
                return o
        return -1

    def handled_inside(self, partition: int) -> int:
        for p, n in self.inside:
            if p == partition:
                return n
        return 0

    def encode(self) -> str:
        inside = dict(self.inside)
        offsets = dict(self.offsets)
        text = ",".join(
            f"{p}:{offsets.get(p, -1)}+{inside[p]}" if p in inside else f"{p}:{offsets[p]}"
            for p in sorted(offsets.keys() | inside.keys())
        )
        return encode_token(text)

    @classmethod
    def parse(cls, encoded: str) -> SubscriptionPosition:
        """A position `encode` made; InvalidValue for anything else."""
        try:
            text = decode_token(encoded)
            pairs = [part.split(":") for part in text.split(",")] if text else []
            offsets = {int(p): int(o.partition("+")[0]) for p, o in pairs}
            inside = {int(p): int(o.partition("+")[2]) for p, o in pairs if "+" in o}
        except ValueError:
            raise InvalidValue(f"not a subscription position: {encoded[:100]!r}") from None
        if (
            any(p < 0 or o < -1 for p, o in offsets.items())
            or len(offsets) != len(pairs)
            or any(n < 1 or offsets[p] < -1 for p, n in inside.items())
        ):
            raise InvalidValue(f"not a subscription position: {encoded[:100]!r}")
        position = cls.of(offsets)
        return cls(position.offsets, tuple(sorted(inside.items())))


# per event: structs the garbage collector does not track (see journal.core.model)
class SubscribedEvent(msgspec.Struct, frozen=True, gc=False):
    """An accepted event of journal `key`; resume after `position` to get what follows it."""

    key: JournalKey
    record: EventRecord
    position: SubscriptionPosition


class Heartbeat(msgspec.Struct, frozen=True, gc=False):
    """Nothing to deliver for a while (or the end of a finite subscription): where it is."""

    position: SubscriptionPosition


SubscriptionItem: TypeAlias = SubscribedEvent | Heartbeat


@dataclass(frozen=True, slots=True)
class SubscriptionConfig:
    kafka: KafkaAccess
    heartbeat_s: float = HEARTBEAT_S
    fetch_max_wait_ms: int = 100
    max_partition_fetch_bytes: int = 1024 * 1024


@dataclass(slots=True)
class _Seen:
    """A journal of the tail: its state as of `last` (its last record read), and up to which
    offset the store had replicated it when its row was read (those records: the table)."""

    state: JournalState
    replicated: int
    last: int


def _retrieved(task: asyncio.Task[object]) -> None:
    """A read ahead's failure is raised where it is awaited; one never awaited is dropped."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True, slots=True)
class _Window:
    """The offsets in (after, to] whose Appends the store's table lists, being read."""

    after: int
    to: int
    offsets: asyncio.Task[frozenset[int]]


class _Listing:
    """A partition's table of accepted Appends below the pointer, read ahead a window at a
    time (one query per window, not per fetch; the next window is read while the reader is
    in the current one). A window up to a pointer read before its query is final: replication
    writes the table before it moves the pointer (a row a later Delete or Purge removes while
    the window is kept is delivered, as if read before it). At most two windows are kept."""

    def __init__(self, store: EventualJournal, topic: str, partition: int) -> None:
        self.store = store
        self.topic = topic
        self.partition = partition
        self.windows: list[_Window] = []  # contiguous, ascending

    def prefetch(self, after: int, pointer: int) -> None:
        """Read the window after `after` (up to `pointer`, read before) unless it is."""
        if after < pointer and not any(w.after <= after < w.to for w in self.windows):
            self._read(after, pointer, after)

    async def listed(self, first: int, last: int, pointer: int) -> Collection[int]:
        """The listed offsets, among others, of [first, last] (`last` <= `pointer`, read
        before); the window after them read ahead."""
        kept = [w for w in self.windows if w.to >= first]
        self._drop([w for w in self.windows if w.to < first])
        if not kept or kept[0].after >= first:
            self._drop(kept)
            kept = [self._read(first - 1, pointer, last)]
        while kept[-1].to < last:
            kept.append(self._read(kept[-1].to, pointer, last))
        self.windows = kept
        try:
            sets = [await w.offsets for w in kept if w.after < last]
        except BaseException:
            self.close()
            raise
        self.prefetch(kept[-1].to, pointer)
        return sets[0] if len(sets) == 1 else frozenset().union(*sets)

    def close(self) -> None:
        self._drop(self.windows)
        self.windows = []

    def _read(self, after: int, pointer: int, at_least: int) -> _Window:
        to = min(pointer, max(at_least, after + _LISTING_WINDOW))
        task = asyncio.create_task(self._offsets(after, to))
        task.add_done_callback(_retrieved)
        window = _Window(after, to, task)
        self.windows.append(window)
        return window

    async def _offsets(self, after: int, to: int) -> frozenset[int]:
        stored = self.store.appends(self.topic, self.partition, after, to)
        return frozenset([s.offset async for s in stored])

    @staticmethod
    def _drop(windows: Iterable[_Window]) -> None:
        for window in windows:
            window.offsets.cancel()


class _Rewind(Exception):
    """The reader must read its partition again from `offset` (folding quietly up to where it
    was) before it can take the fold's verdicts."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class _PartitionReader:
    """One partition's reader: which of its records' Appends are accepted, and where it is.

    The fold's verdict of a journal's record needs the journal's state just before it: the
    state of its row, read after the pointer, is that only if this reader has read every
    record of the partition since the pointer (`read_from` <= pointer + 1). A subscriber that
    resumes above the pointer therefore first re-reads from the pointer on, folding without
    delivering up to where it was (`quiet_to`): at most the unreplicated tail.
    """

    def __init__(
        self,
        store: EventualJournal,
        topic: str,
        partition: int,
        cursor: int,
        slot: int | None = None,
        moved_from: tuple[str, ...] = (),
    ) -> None:
        self.store = store
        self.topic = topic
        self.partition = partition
        self.slot = partition if slot is None else slot  # its entry in a position
        # a grown topic's successor: the predecessors, nearest first, that hold the bases of
        # its moved journals; it is read only once its predecessor partition is delivered and
        # replicated through its cut (`Subscription`), until then `held`
        self.moved_from = moved_from
        self.held = bool(moved_from)
        self.sealed = False  # a Seal was read here: the registry may hold a grow to follow
        self.cursor = cursor  # the last offset delivered or passed: the position
        self.next = cursor + 1  # the offset the consumer delivers next
        self.read_from = self.next  # every record from here on was read, in order
        self.quiet_to = -1  # records at or below: folded, not delivered (delivered already)
        self.pointer = -1  # the store's pointer as last read
        self.folding = False  # in the tail: verdicts from the fold
        self.seen: OrderedDict[JournalKey, _Seen] = OrderedDict()  # by last record
        self.pointer_read_at = 0.0
        self.pointer_ahead: asyncio.Task[int | None] | None = None  # the tail's refresh
        self.boundary = -1  # the pointer the tail started after
        # rows of the next fetch's journals, read ahead: (the pointer asked before, the read)
        self.rows_ahead: dict[JournalKey, tuple[int, asyncio.Task[JournalMeta | None]]] = {}
        self.listing = _Listing(store, topic, partition)
        self.whole = False  # the store down: folded from offset 0 without it
        # the partition's cut by a grow (docs/growing.md): its first Seal; every record after
        # it is MOVED, never delivered here. Learnt from the registry when the tail starts
        # (replication records a cut before its pointer passes it) or from the Seal itself
        self.cut: int | None = None
        self.registry_read = False

    def seek(self, offset: int) -> None:
        self.next = self.read_from = offset

    def pending(
        self, fetched: Sequence[ConsumerRecord[bytes, bytes]], end: int | None
    ) -> list[ConsumerRecord[bytes, bytes]]:
        """The fetched records not handled yet, below `end` (None: no end)."""
        return [m for m in fetched if m.offset >= self.next and (end is None or m.offset < end)]

    async def read_pointer(self) -> int:
        self.took_pointer(await self.store.pointer(self.topic, self.partition))
        return self.pointer

    def took_pointer(self, pointer: int | None) -> None:
        self.pointer = max(self.pointer, -1 if pointer is None else pointer)
        self.pointer_read_at = asyncio.get_running_loop().time()

    def _pointer_stale(self) -> bool:
        """Any pointer read serves (the tail then starts after it); one read lately (as all
        are at the start) is not asked again."""
        return asyncio.get_running_loop().time() - self.pointer_read_at >= _POINTER_REFRESH_S

    def read_rows_ahead(self, fetched: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        """Ask the rows of the journals of `fetched` (the next fetch) that the tail has no
        state of. Only `_rows` of the next fetch takes them (see there), then they are
        dropped: they are never older than one fetch."""
        if self.whole or not (self.folding or fetched[-1].offset > self.pointer):
            return  # no rows needed: verdicts from the table or the fold alone
        for raw in {m.key for m in fetched if m.key}:
            try:
                key = JournalKey(self.topic, raw.decode("utf-8"))
            except (UnicodeDecodeError, InvalidValue):
                continue  # a malformed record: the fold never sees it
            if key not in self.seen and key not in self.rows_ahead:
                read = asyncio.create_task(self.store.meta(key))
                read.add_done_callback(_retrieved)
                self.rows_ahead[key] = (self.pointer, read)

    def drop_rows_ahead(self) -> None:
        for _, read in self.rows_ahead.values():
            read.cancel()
        self.rows_ahead.clear()

    def close(self) -> None:
        """Cancel what is read ahead."""
        self.drop_rows_ahead()
        self.listing.close()
        if self.pointer_ahead is not None:
            self.pointer_ahead.cancel()
            self.pointer_ahead = None

    def go_whole(self) -> None:
        """Fold from offset 0 with no store (`seek` there): Kafka holds the whole partition."""
        self.whole, self.folding, self.quiet_to = True, True, max(self.quiet_to, self.cursor)
        self.seen.clear()
        self.close()

    async def accepted(self, actions: Sequence[ActionRecord]) -> list[ActionRecord]:
        """The accepted Appends among `actions` (this partition's, in offset order) that are
        not delivered yet. Raises _Rewind."""
        if not actions:
            return []
        if not self.sealed:
            self.sealed = any(a.key.id == SEAL_ID for a in actions)
        if self.whole:
            return self._fold(actions, set())
        if not self.folding and actions[-1].offset > self.pointer and self._pointer_stale():
            await self.read_pointer()  # replication may have gone further
        if not self.folding:
            replicated = [a for a in actions if a.offset <= self.pointer]
            appends = [a.offset for a in replicated if isinstance(a.header, AppendHeader)]
            listed: Collection[int] = ()
            if appends:
                listed = await self.listing.listed(appends[0], appends[-1], self.pointer)
            kept = [a for a in replicated if a.offset in listed and a.offset > self.quiet_to]
            rest = actions[len(replicated) :]
            if not rest:
                return kept
            self._enter_tail()
            await self._learn_cut()
            return kept + await self._tail(rest)
        return await self._tail(actions)

    async def _learn_cut(self) -> None:
        """The registry's cut of this partition, read once as the tail starts: a Seal below
        the pointer the tail starts after is recorded there; one above it comes in the tail."""
        if self.cut is None and not self.registry_read:
            grow = await self.store.grow(self.topic)
            self.registry_read = True
            if grow is not None and self.partition in grow.cut:
                self.cut = grow.cut[self.partition]

    def _enter_tail(self) -> None:
        self.folding = True
        self.seen.clear()
        self.boundary = self.pointer
        if self.read_from > self.pointer + 1:
            self.quiet_to = max(self.quiet_to, self.cursor)
            self.folding = False  # until the rewound reader reaches the pointer again
            raise _Rewind(self.pointer + 1)

    async def _listed(self, actions: Sequence[ActionRecord]) -> set[int]:
        """The offsets among `actions` whose Appends the store's table lists (one query)."""
        appends = [a for a in actions if isinstance(a.header, AppendHeader)]
        if not appends:
            return set()
        stored = self.store.appends(
            self.topic, self.partition, appends[0].offset - 1, appends[-1].offset
        )
        return {s.offset async for s in stored}

    async def _tail(self, actions: Sequence[ActionRecord]) -> list[ActionRecord]:
        await self._rows({a.key for a in actions if a.key not in self.seen}, actions[0].offset)
        # records a row already reflected: the table has their verdicts
        listed = await self._listed([a for a in actions if a.offset <= self.seen[a.key].replicated])
        accepted = self._fold(actions, listed)
        self._evict()
        return accepted

    async def _rows(self, keys: Collection[JournalKey], first: int) -> None:
        """Read the rows of journals seen first in the tail. Every record of the partition
        since the pointer was read has been folded, so a journal seen first at offset y had
        no record in between: its row (read after the pointer) is its state before y, unless
        the row reflects y or later, whose records then take the table's verdicts. A row
        read ahead serves if it was asked after that pointer (or a later one) was read, as
        no record was handled since."""
        ordered = list(keys)
        ahead = self.rows_ahead
        metas = await asyncio.gather(
            *(
                ahead.pop(key)[1]
                if key in ahead and ahead[key][0] >= self.boundary
                else self.store.meta(key)
                for key in ordered
            )
        )
        bases: Mapping[JournalKey, JournalState] = {}
        if self.moved_from:  # a journal without a row here starts from its base
            missing = [key.id for key, meta in zip(ordered, metas, strict=True) if meta is None]
            bases = await moved_bases(self._rows_of, self.topic, missing, self.moved_from)
        for key, meta in zip(ordered, metas, strict=True):
            state = bases.get(key, JournalState()) if meta is None else meta.state
            self.seen[key] = _Seen(state, state.offset, first - 1)

    async def _rows_of(self, keys: list[JournalKey]) -> dict[JournalKey, JournalMeta]:
        metas = await asyncio.gather(*(self.store.meta(key) for key in keys))
        return {key: meta for key, meta in zip(keys, metas, strict=True) if meta is not None}

    def _fold(self, actions: Sequence[ActionRecord], listed: Collection[int]) -> list[ActionRecord]:
        accepted: list[ActionRecord] = []
        for action in actions:
            seen = self.seen.get(action.key)
            if seen is None:  # whole: the journal starts empty at offset 0
                seen = self.seen[action.key] = _Seen(JournalState(), -1, -1)
            if self.cut is None and action.key.id == SEAL_ID:
                self.cut = action.offset  # the first Seal: the partition ends here
            if action.offset <= seen.replicated:
                taken = action.offset in listed
            else:
                seen.state, verdict = seen.state.apply(action.header, action.offset, self.cut)
                taken = verdict is Verdict.APPENDED
            if taken and action.offset > self.quiet_to:
                accepted.append(action)
            seen.last = action.offset
            self.seen.move_to_end(action.key)
        return accepted

    def _evict(self) -> None:
        """Forget the journals whose records the store reflects (read again if seen), by the
        pointer read in the background meanwhile (its failure raised here); read it again
        now and then."""
        ahead = self.pointer_ahead
        if ahead is not None and ahead.done():
            self.pointer_ahead = None
            self.took_pointer(ahead.result())
            while self.seen:
                key, seen = next(iter(self.seen.items()))
                if seen.last > self.pointer:
                    break
                del self.seen[key]
        if self.pointer_ahead is None and self._pointer_stale():
            self.pointer_read_at = asyncio.get_running_loop().time()
            self.pointer_ahead = asyncio.create_task(self.store.pointer(self.topic, self.partition))
            self.pointer_ahead.add_done_callback(_retrieved)

    def restart_after_gap(self, first: int) -> None:
        """Records went missing under the reader (expired), up to `first`: filled from the
        store, so verdicts start over from the table, the tail's states read again."""
        self.folding = False
        self.seen.clear()
        self.seek(first)


@dataclass(slots=True)
class _Linked:
    """A topic of a subscription's chain (docs/growing.md): the subscribed topic, then each
    grow's successor in turn. Its partitions take the slots `first` .. `first + partitions - 1`
    of a position, so the subscribed topic's slots are its partitions (positions of earlier
    versions resume)."""

    topic: str
    partitions: int
    first: int
    grow: Grow | None = None  # its grow into the next topic, as last read


async def _extend_chain(
    store: EventualJournal, chain: list[_Linked], extend: bool
) -> list[_Linked]:
    """Read the registry's record of every grow of `chain` not done yet (a cut may have been
    recorded since); with `extend`, append the successor of its last topic once that exists
    (the grow created it), and so on along the chain. The topics appended."""
    added: list[_Linked] = []
    for linked in chain:  # grows as `chain` is appended to
        if linked.grow is None or linked.grow.phase is not Phase.DONE:
            linked.grow = await store.grow(linked.topic)
        grow = linked.grow
        if extend and linked is chain[-1] and grow is not None and grow.phase is not Phase.PLANNED:
            successor = _Linked(grow.new_topic, grow.partitions, linked.first + linked.partitions)
            chain.append(successor)
            added.append(successor)
    return added


class Subscription:
    """One subscriber's stream over all partitions of a topic (`subscribe`), and, where the
    topic grew, of its successors: a journal's events across the move in order (NEW/q is read
    once OLD/(q mod N) is delivered and replicated through its cut, see `_release`)."""

    # `_from_store` yields after every stored Append, even one that delivered nothing here:
    # a group member delivers into a buffer of its own and checks its cap between the steps
    _step_per_append = False

    def __init__(
        self,
        topic: str,
        partitions: int,
        store: EventualJournal,
        config: SubscriptionConfig,
        after: SubscriptionPosition,
        tags: Collection[str],
        live: bool,
        openers: Openers | None = None,
    ) -> None:
        self._topic = topic
        self._store = store
        # encrypted journals' payloads opened as their records are decoded (docs/erasure.md)
        self._openers = openers
        self._config = config
        self._tags = frozenset(tags)
        self._live = live
        self._after = after
        self._chain = [_Linked(topic, partitions, 0)]
        self._readers: list[_PartitionReader] = []  # by slot
        self._tps: list[TopicPartition] = []  # by slot
        self._slots: dict[TopicPartition, int] = {}
        # per slot, `((slot, n),)` at index n: the `inside` of an event's position, shared by
        # every Append's events (a tuple per event would be garbage the collector tracks, at
        # hundreds of thousands of events a second)
        self._insides: list[list[Offsets]] = []
        self._add_readers(self._chain[0])
        # per slot: the record right after `after`'s, and how many of its events `after` had
        # handled (skipped when it comes, dropped once passed)
        self._skips = {p: (after.offset(p) + 1, n) for p, n in after.inside}
        self._registry_unread = True  # the chain's grows are still to be read
        self._registry_read_at = -_POINTER_REFRESH_S

    def _add_readers(self, linked: _Linked) -> None:
        before = tuple(link.topic for link in reversed(self._chain) if link.first < linked.first)
        for partition in range(linked.partitions):
            slot = linked.first + partition
            cursor = self._after.offset(slot)
            reader = _PartitionReader(self._store, linked.topic, partition, cursor, slot, before)
            tp = TopicPartition(linked.topic, partition)
            self._readers.append(reader)
            self._tps.append(tp)
            self._slots[tp] = slot
            self._insides.append([()])

    def position(self) -> SubscriptionPosition:
        # entries of slots not read (yet): a chain not known here, kept as they came
        kept = {slot: o for slot, o in self._after.offsets if slot >= len(self._readers)}
        position = SubscriptionPosition.of(kept | {r.slot: r.cursor for r in self._readers})
        return SubscriptionPosition(position.offsets, self._inside())

    def _inside(self, but: int = -1) -> Offsets:
        """The `inside` entries of the skips still ahead (their readers not past them), but
        slot `but`'s."""
        readers = self._readers
        return tuple(
            sorted(
                (p, n)
                for p, (at, n) in self._skips.items()
                if p != but and (p >= len(readers) or readers[p].cursor == at - 1)
            )
        )

    async def batches(self) -> AsyncIterator[list[SubscriptionItem]]:
        """The items as they come, a non-empty list at a time: what one fetch gave."""
        chain = asyncio.create_task(self._follow())  # while the consumer starts
        chain.add_done_callback(_retrieved)
        try:
            consumer = await start_consumer(
                self._config.kafka,
                fetch_max_wait_ms=self._config.fetch_max_wait_ms,
                max_partition_fetch_bytes=self._config.max_partition_fetch_bytes,
            )
        except BaseException:
            chain.cancel()
            raise
        try:
            async for batch in self._run(consumer, chain):
                yield batch
        finally:
            chain.cancel()
            for reader in self._readers:
                reader.close()
            await stop_consumer(consumer)

    async def _run(
        self, consumer: AIOKafkaConsumer, chain: asyncio.Task[bool]
    ) -> AsyncIterator[list[SubscriptionItem]]:
        await chain  # the topics to assign
        # assigned first: the topics' metadata is asked now, which the offsets wait for (not
        # knowing their leaders, they would retry after a backoff); the fetches start meanwhile
        self._assign(consumer)
        pointers = asyncio.create_task(self._pointers())  # while Kafka's answers are awaited
        pointers.add_done_callback(_retrieved)
        try:
            starts, ends = await asyncio.gather(
                consumer.beginning_offsets(self._tps), consumer.end_offsets(self._tps)
            )
        except KafkaError as error:
            pointers.cancel()
            raise core_error(error, f"{self._topic}: no offsets") from error
        await pointers
        # live=false ends at the high watermarks as of the start
        stop_at = {self._slots[tp]: end for tp, end in ends.items()} if not self._live else None
        for reader in self._readers:  # beyond retention first: from the store
            tp = self._tps[reader.slot]
            if not reader.held and reader.cursor + 1 < starts[tp]:
                async for batch in self._from_store(reader, starts[tp] - 1):
                    yield batch
                consumer.seek(tp, reader.next)  # a seek drops what was fetched: only here
        for reader in self._readers:
            reader.seek(reader.next)
            reader.listing.prefetch(reader.next - 1, reader.pointer)  # with the first fetch
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        ahead: Fetched | Exception | None = None  # the next fetch, taken early
        while True:
            if ahead is None and self._upkeep_due(loop.time()):
                async for batch in self._upkeep(consumer):
                    quiet_since = loop.time()
                    yield batch
            if stop_at is not None:
                done = [tp for tp in self._tps if self._done(tp, stop_at)]
                consumer.pause(*done)
                if len(done) == len(self._tps):
                    yield [Heartbeat(self.position())]
                    return
            if ahead is None:
                wait_s = max(0.0, quiet_since + self._config.heartbeat_s - loop.time())
                if self._upkeep_wanted():
                    wait_s = min(wait_s, _POINTER_REFRESH_S)
                batches = await self._fetch(consumer, min(wait_s, 1.0))
            elif isinstance(ahead, Exception):
                raise ahead
            else:
                batches = ahead
            ahead = None
            delivered = False
            chunks: list[tuple[_PartitionReader, list[ConsumerRecord[bytes, bytes]]]] = []
            for tp, fetched in batches.items():
                slot = self._slots.get(tp)
                if slot is None:
                    continue
                reader = self._readers[slot]
                end = None if stop_at is None else stop_at.get(slot, 0)
                messages = [
                    m
                    for m in fetched
                    if m.offset >= reader.next and (end is None or m.offset < end)
                ]
                if not messages or reader.held:
                    continue
                first = messages[0].offset
                if not reader.whole and first > reader.next:
                    # Kafka moved its log start past the reader (retention): the gap from
                    # the store
                    async for batch in self._from_store(reader, first - 1):
                        delivered = True
                        yield batch
                    reader.restart_after_gap(first)
                chunks.append((reader, messages))
            # every partition's chunk at once (their store queries overlap); the fetch's
            # events as one list: a generator step per event costs more than the event
            batch = [item for chunk in await self._handle(consumer, chunks) for item in chunk]
            for reader in self._readers:
                reader.drop_rows_ahead()
            if batch:
                delivered = True
                ahead = await self._look_ahead(consumer)
                yield batch
            if delivered:
                quiet_since = loop.time()
            elif loop.time() - quiet_since >= self._config.heartbeat_s:
                quiet_since = loop.time()
                yield [Heartbeat(self.position())]

    def _assign(self, consumer: AIOKafkaConsumer) -> None:
        """Every slot's partition assigned, at its reader's next record; held ones paused."""
        consumer.assign(self._tps)
        for reader in self._readers:
            consumer.seek(self._tps[reader.slot], reader.next)
        consumer.pause(*(self._tps[r.slot] for r in self._readers if r.held))

    def _upkeep_wanted(self) -> bool:
        """Whether the registry or the predecessors' pointers must be read again: a reader
        is held, a grow of the chain is not done, or the chain's last topic showed a Seal."""
        last = self._chain[-1].topic
        readers = self._active()
        return (
            self._registry_unread
            or any(r.held or (r.sealed and r.topic == last) for r in readers)
            or any(
                link.grow is not None and link.grow.phase is not Phase.DONE for link in self._chain
            )
        )

    def _active(self) -> Sequence[_PartitionReader]:
        """The readers that read (a group member's: those of the partitions it owns)."""
        return self._readers

    def _upkeep_due(self, now: float) -> bool:
        return self._upkeep_wanted() and now - self._registry_read_at >= _POINTER_REFRESH_S

    async def _upkeep(self, consumer: AIOKafkaConsumer) -> AsyncIterator[list[SubscriptionItem]]:
        """Follow the chain: its grows read again (a live subscription takes on a successor
        created meanwhile, assigning it), and the held readers whose turn came released:
        what is beyond Kafka's retention from the store, then from Kafka."""
        self._registry_read_at = asyncio.get_running_loop().time()
        added = await self._follow()
        if added:
            self._assign(consumer)
        for reader in await self._release():
            tp = self._tps[reader.slot]
            start = await log_start(consumer, tp)
            if reader.cursor + 1 < start:
                async for batch in self._from_store(reader, start - 1):
                    yield batch
            reader.seek(reader.next)
            consumer.seek(tp, reader.next)
            consumer.resume(tp)

    async def _follow(self) -> bool:
        """The chain's grows read again (`_extend_chain`); True if topics were added. The
        store down: tried again at the next upkeep (what is known is read meanwhile)."""
        try:
            added = await _extend_chain(
                self._store, self._chain, extend=self._live or self._registry_unread
            )
        except StoreUnavailable:
            return False
        self._registry_unread = False
        for linked in added:
            self._add_readers(linked)
        return bool(added)

    async def _release(self) -> list[_PartitionReader]:
        """The held readers whose predecessor partition is delivered through its cut (so a
        journal's events stay in order across the move) and replicated through it (so a
        moved journal's base, its row there, is final), now read."""
        released: list[_PartitionReader] = []
        pointers: dict[str, dict[int, int]] = {}
        for linked, successor in zip(self._chain, self._chain[1:], strict=False):
            grow = linked.grow
            for q in range(successor.partitions):
                reader = self._readers[successor.first + q]
                p = q % linked.partitions
                before = self._readers[linked.first + p]
                cut = None if grow is None else grow.cut.get(p)
                if not reader.held or cut is None or before.held or before.cursor < cut:
                    continue
                if before.pointer < cut:
                    if linked.topic not in pointers:
                        try:
                            pointers[linked.topic] = await self._store.pointers(linked.topic)
                        except StoreUnavailable:
                            return released  # the rest at the next upkeep
                    before.took_pointer(pointers[linked.topic].get(p))
                if before.pointer >= cut:
                    reader.held = False
                    released.append(reader)
        return released

    def _predecessor(self, reader: _PartitionReader) -> tuple[_Linked, int]:
        """A successor's reader's predecessor topic, and the partition of it it follows."""
        index = next(i for i, link in enumerate(self._chain) if link.topic == reader.topic)
        linked = self._chain[index - 1]
        return linked, reader.partition % linked.partitions

    async def _look_ahead(self, consumer: AIOKafkaConsumer) -> Fetched | Exception:
        """The next fetch where the consumer holds it already, taken before this one is
        delivered, so that the rows its journals will need are read meanwhile; its failure
        is raised when it is handled."""
        try:
            batches = await self._fetch(consumer, 0.0)
        except Exception as error:  # raised in its turn, as a fetch then would
            return error
        for tp, fetched in batches.items():
            slot = self._slots.get(tp)
            if fetched and slot is not None:
                self._readers[slot].read_rows_ahead(fetched)
        return batches

    async def _pointers(self) -> None:
        """Every partition's pointer, a query a topic of the chain. The store down: each
        reader asks its own where it needs it (and fails there, as it would have without
        this)."""
        try:
            for linked in self._chain:
                pointers = await self._store.pointers(linked.topic)
                for reader in self._readers[linked.first : linked.first + linked.partitions]:
                    reader.took_pointer(pointers.get(reader.partition))
        except StoreUnavailable:
            return

    def _done(self, tp: TopicPartition, stop_at: Mapping[int, int]) -> bool:
        slot = self._slots[tp]
        return self._readers[slot].cursor >= stop_at.get(slot, 0) - 1

    async def _fetch(
        self, consumer: AIOKafkaConsumer, timeout_s: float, max_records: int = _FETCH_RECORDS
    ) -> Fetched:
        try:
            batches: Fetched
            batches = await consumer.getmany(
                timeout_ms=int(timeout_s * 1000), max_records=min(max_records, _FETCH_RECORDS)
            )
            return batches
        except POISON_ERRORS as error:
            # cannot tell what the batch holds; the client resumes once replication skipped it
            raise KafkaUnavailable(f"{self._topic}: an undecodable batch: {error!r}") from error
        except KafkaError as error:
            raise core_error(error, self._topic) from error

    async def _handle(
        self,
        consumer: AIOKafkaConsumer,
        chunks: Sequence[tuple[_PartitionReader, Sequence[ConsumerRecord[bytes, bytes]]]],
    ) -> list[list[SubscriptionItem]]:
        """The events to deliver from each chunk (a partition's next records, in order). The
        partitions' verdicts are taken concurrently: each may wait on a store query. With
        encryption, the chunks' journals' keys are looked up first, all at once (the process
        caches them), so each Append is opened as it is decoded."""
        found = None if self._openers is None else await self._found(chunks)
        verdicts = await asyncio.gather(
            *(_verdicts(reader, messages, found) for reader, messages in chunks),
            return_exceptions=True,
        )
        delivered: list[list[SubscriptionItem]] = []
        for (reader, messages), verdict in zip(chunks, verdicts, strict=True):
            if isinstance(verdict, BaseException):
                await self._handle_failure(consumer, reader, verdict)
                continue
            accepted, passing = verdict
            events: list[SubscriptionItem] = []
            around = self._around(reader.slot)
            for action in accepted:
                key = self._key(reader, action.key)
                offset = action.offset
                passed = passing.get(offset, ()) if passing else ()
                self._deliver(reader, key, events_of(action), offset, around, events, passed)
            reader.next = messages[-1].offset + 1
            reader.cursor = max(reader.cursor, messages[-1].offset)
            delivered.append(events)
        return delivered

    async def _found(
        self, chunks: Iterable[tuple[_PartitionReader, Sequence[ConsumerRecord[bytes, bytes]]]]
    ) -> dict[bytes, Found]:
        """The keys of the chunks' journals, by their records' raw key, looked up together
        (`Openers`: a journal the process has not cached costs one store read, all at once).
        A journal is named under the subscribed topic, as a moved journal's key is kept
        (docs/erasure.md)."""
        raws = {m.key for _, messages in chunks for m in messages if m.key}
        keys: dict[bytes, JournalKey] = {}
        for raw in raws:
            try:
                keys[raw] = JournalKey(self._topic, raw.decode("utf-8"))
            except (UnicodeDecodeError, InvalidValue):
                continue  # a malformed record: the fold never sees it
        assert self._openers is not None
        found = await self._openers(keys.values())
        return {raw: found[key] for raw, key in keys.items()}

    async def _handle_failure(
        self, consumer: AIOKafkaConsumer, reader: _PartitionReader, failure: BaseException
    ) -> None:
        """A partition whose verdicts could not be taken: read it again from where it must
        be (its next records are not handled), or fail the subscription."""
        tp = self._tps[reader.slot]
        if isinstance(failure, _Rewind):
            consumer.seek(tp, failure.offset)
            reader.seek(failure.offset)
            return
        if not isinstance(failure, StoreUnavailable):
            raise failure
        if reader.whole or reader.moved_from or await log_start(consumer, tp) != 0:
            raise failure  # (a successor's moved journals need their bases: the store)
        # Kafka holds the whole partition: fold it from offset 0, without the store
        METRICS.counter("kafka_journal_subscription_whole_folds_total").inc()
        log.warning("%s-%s: the store is down: folding from 0", tp.topic, tp.partition)
        reader.go_whole()
        consumer.seek(tp, 0)
        reader.seek(0)

    async def _from_store(
        self, reader: _PartitionReader, to: int
    ) -> AsyncIterator[list[SubscriptionItem]]:
        """The stored Appends in (cursor, to], from the store: the records are gone from
        Kafka. Those never replicated are lost: JournalTruncated."""
        if await reader.read_pointer() < to:
            raise JournalTruncated(
                f"{reader.topic}-{reader.partition}: records up to offset {to} are gone from "
                f"Kafka, but the store has them only up to {reader.pointer}"
            )
        METRICS.counter("kafka_journal_subscription_store_reads_total").inc()
        stored = self._store.appends(reader.topic, reader.partition, reader.cursor, to)
        around = self._around(reader.slot)
        async for append in stored:
            key = self._key(reader, append.key)
            events, passed = await self._stored_events(key, append)
            delivered: list[SubscriptionItem] = []
            self._deliver(reader, key, events, append.offset, around, delivered, passed)
            if delivered or self._step_per_append:
                yield delivered
        reader.cursor = max(reader.cursor, to)
        reader.next = max(reader.next, to + 1)

    async def _stored_events(
        self, key: JournalKey, append: StoredAppend
    ) -> tuple[Sequence[EventRecord], Container[int]]:
        """A stored Append's events; with encryption, opened as the store decodes them, and
        the indices of those passed by (`_unopened`)."""
        if self._openers is None:
            return [e async for e in self._store.append_events(append)], ()
        found = (await self._openers((key,)))[key]
        if isinstance(found, Opener):
            try:
                return [e async for e in self._store.append_events(append, found)], ()
            except EnvelopeRefused:
                pass  # each event opened alone below
        return _unopened([e async for e in self._store.append_events(append)], found)

    def _deliver(
        self,
        reader: _PartitionReader,
        key: JournalKey,
        events: Sequence[EventRecord],
        offset: int,
        around: tuple[Offsets, Offsets],
        into: list[SubscriptionItem],
        passed: Container[int] = (),
    ) -> None:
        """An Append's events, appended to `into`; all but the last at the offset before it
        (see the module). Two positions per Append, whatever its size; `around`: the
        position's entries of the other partitions (`_around`). The events at `passed`
        (`_unopened`) become heartbeats at their positions: a subscriber resumes exactly
        after them."""
        reader.cursor = offset
        partition = reader.slot
        skipped = 0
        if partition in self._skips:  # resumed inside an Append: its first events are handled
            at, n = self._skips.pop(partition)
            skipped = n if at == offset else 0
        if len(events) <= skipped:  # deleted from the store meanwhile, or all handled
            return
        tags = self._tags
        before, after = around
        others = self._inside(partition) if self._skips else ()
        last = events[-1]
        if len(events) - skipped > 1:
            offsets = (*before, (partition, offset - 1), *after)
            insides = self._insides[partition]
            while len(insides) < len(events):
                insides.append(((partition, len(insides)),))
            for i in range(skipped, len(events) - 1):
                record = events[i]
                if not tags or tags & record.event.tags:
                    if others:  # resumed inside Appends of other partitions: rare
                        inside = tuple(sorted(((partition, i + 1), *others)))
                    else:
                        inside = insides[i + 1]
                    position = SubscriptionPosition(offsets, inside)
                    if passed and i in passed:
                        into.append(Heartbeat(position))
                    else:
                        into.append(SubscribedEvent(key, record, position))
        if not tags or tags & last.event.tags:
            position = SubscriptionPosition((*before, (partition, offset), *after), others)
            if passed and len(events) - 1 in passed:
                into.append(Heartbeat(position))
            else:
                into.append(SubscribedEvent(key, last, position))

    def _key(self, reader: _PartitionReader, key: JournalKey) -> JournalKey:
        """A moved journal's events under the subscribed topic, as a read of it names it."""
        return key if reader.topic == self._topic else JournalKey(self._topic, key.id)

    def _around(self, partition: int) -> tuple[Offsets, Offsets]:
        """The position's entries of the slots before `partition` and after it: they do
        not change while one partition's records are handled."""
        entries = self.position().offsets
        return (
            tuple(e for e in entries if e[0] < partition),
            tuple(e for e in entries if e[0] > partition),
        )


async def _verdicts(
    reader: _PartitionReader,
    messages: Iterable[ConsumerRecord[bytes, bytes]],
    found: Mapping[bytes, Found] | None,
) -> tuple[list[ActionRecord], _Passing]:
    """The accepted Appends of a partition's records, decoded in the task that waits for
    their verdicts: one partition's decoding runs while another's store query is out. With
    the `found` keys of their journals (encryption), opened as they are decoded; the events
    passed by (`_unopened`), by offset."""
    if found is None:
        return await reader.accepted(_actions(messages)), _NO_PASSING
    actions, passing = _opened_actions(messages, found)
    return await reader.accepted(actions), passing


def _actions(messages: Iterable[ConsumerRecord[bytes, bytes]]) -> list[ActionRecord]:
    """The actions of the records as replication parses them: a malformed one is skipped,
    as replication quarantines it (the fold never sees it)."""
    actions: list[ActionRecord] = []
    for message in messages:
        try:
            action = parse_checked(raw_record(message))
        except MalformedRecord:
            continue
        if action is not None:
            actions.append(action)
    return actions


def _opened_actions(
    messages: Iterable[ConsumerRecord[bytes, bytes]], found: Mapping[bytes, Found]
) -> tuple[list[ActionRecord], dict[int, Container[int]]]:
    """`_actions`, each Append's events opened as they are decoded with the opener its
    journal's look-up `found` (each event built once, its envelope opened once); an Append
    that could not be, decoded without the key (`_unopened`), its events passed by listed by
    offset. A malformed record is skipped as without the key."""
    actions: list[ActionRecord] = []
    passing: dict[int, Container[int]] = {}
    for message in messages:
        record = raw_record(message)
        key = found.get(message.key) if message.key else None
        opener = key if isinstance(key, Opener) else None
        try:
            action, refused = parse_checked(record, opener), False
        except EnvelopeRefused:  # sound (checked first), but its envelope does not open
            action, refused = parse_checked(record), True
        except MalformedRecord:
            continue
        if action is None:
            continue
        if action.events is not None and (opener is None or refused):
            events, passed = _unopened(action.events, key)
            if passed:
                passing[action.offset] = passed
            if events is not action.events:
                action = replace(action, events=tuple(events))
        actions.append(action)
    return actions, passing


def _unopened(
    records: Sequence[EventRecord], found: Found
) -> tuple[Sequence[EventRecord], Container[int]]:
    """An Append's events decoded without its journal's key, as a subscription delivers them
    (docs/erasure.md), and the indices of those it passes by (a heartbeat at the event's
    position; a group member acknowledges it): all of an erased journal's; a journal without
    a key's sealed payloads (the rest is plain); with its key (its Append's envelope refused
    as a whole) each event opened alone, those that do not open passed by. Rare: an Append
    of a readable journal is opened as it is decoded."""
    if isinstance(found, Unreadable):
        return records, range(len(records))
    if found is None:
        return records, [i for i, record in enumerate(records) if _sealed(record)]
    opened: list[EventRecord] = []
    passed: list[int] = []
    last = OpenedAppend()
    for i, record in enumerate(records):
        try:
            [record] = found.records([record], last)
        except EnvelopeRefused:
            passed.append(i)
        opened.append(record)
    return opened, passed


def _sealed(record: EventRecord) -> bool:
    payload = record.event.payload
    return is_sealed(payload) or (
        type(payload) is BinaryPayload and is_append_envelope(payload.value)
    )


async def end_position(
    kafka: KafkaAccess, topic: str, partitions: int, store: EventualJournal | None = None
) -> SubscriptionPosition:
    """After every record the topic holds now (and, given the `store`, its grown successors,
    whose slots follow its own): a subscription after it delivers only what is appended from
    then on (a live tail "from now", where from the start would first go through the whole
    retained log)."""
    chain = [_Linked(topic, partitions, 0)]
    if store is not None:
        await _extend_chain(store, chain, extend=True)
    offsets: dict[int, int] = {}
    for linked in chain:
        try:
            ends = await end_offsets(kafka, linked.topic, linked.partitions)
        except KafkaError as error:
            raise core_error(error, f"{linked.topic}: no high watermarks") from error
        offsets |= {linked.first + partition: end - 1 for partition, end in ends.items()}
    return SubscriptionPosition.of(offsets)


async def chain_slots(
    topic: str, partitions: int, store: EventualJournal | None
) -> list[TopicPartition]:
    """The partitions a subscription of `topic` reads, indexed by their slot: the topic's
    own, then (given the `store`, whose registry knows the grows) each grown successor's in
    turn (docs/growing.md). What a group's administration numbers partitions by, as its
    event positions do."""
    chain = [_Linked(topic, partitions, 0)]
    if store is not None:
        await _extend_chain(store, chain, extend=True)
    return [TopicPartition(linked.topic, p) for linked in chain for p in range(linked.partitions)]


async def subscribe(
    topic: str,
    partitions: int,
    store: EventualJournal,
    config: SubscriptionConfig,
    after: SubscriptionPosition | None = None,
    tags: Collection[str] = (),
    live: bool = False,
    openers: Openers | None = None,
) -> AsyncIterator[SubscriptionItem]:
    """Every accepted event of `topic` after `after` (None: from the start), streamed:
    `subscribe_batches`, one item at a time."""
    batches = subscribe_batches(topic, partitions, store, config, after, tags, live, openers)
    async for batch in batches:
        for item in batch:
            yield item


def subscribe_batches(
    topic: str,
    partitions: int,
    store: EventualJournal,
    config: SubscriptionConfig,
    after: SubscriptionPosition | None = None,
    tags: Collection[str] = (),
    live: bool = False,
    openers: Openers | None = None,
) -> AsyncIterator[list[SubscriptionItem]]:
    """`subscribe`, a list of items at a time as they come (for a writer that sends each
    list on at once: one write per fetch, not per event). `openers`: an encrypting
    deployment's (`Openers`): each encrypted payload opened as its record is decoded, an
    erased journal's events passed by (docs/erasure.md)."""
    subscription = Subscription(
        topic, partitions, store, config, after or SubscriptionPosition(), tags, live, openers
    )
    return subscription.batches()
