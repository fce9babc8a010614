"""The eventual store's two sides, after kafka-journal's EventualJournal and ReplicatedJournal.

The read side serves journal reads; the write side is used only by replication. Both speak
in terms of one Kafka topic's partitions, because replication advances per partition.

Contract (every implementation runs `tests/journal/store/contract.py`):
- Replaying records is harmless: folded onto what `stored` answers, a batch applied already
  (or an older one) yields writes that change nothing.
- The pointer of a partition only moves forward.
- A read returns strictly increasing seqNrs above the journal's deleteTo, streamed: an
  implementation never holds a whole journal in memory.
- `appends` lists, per partition in offset order, every Append replication stored (accepted by
  the fold) that still has an event stored, written with the events, before the rows: a
  Delete or Purge that removes an Append's last events removes its entry, within its batch or
  in a later one (`JournalWrite.removal`), and a replay brings none back.
- Snapshots (`SnapshotStore`) are ordered by the offsets of Marks, as replication's writes
  are by their actions' offsets: a put or delete of snapshots stamped with its Mark, and a
  Purge applied by replication, affect exactly what lies before them in the log.
- `journal_ids` lists the journals whose stored state `exists` (journal.core.fold), kept by
  `apply` from each write's `before` and `after` alone, without reading the store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from journal.codec.envelope import OpenedAppend, Opener
from journal.core.fold import JournalState, JournalWrite, rebased
from journal.core.grow import Grow, Phase
from journal.core.model import (
    SEQ_NR_MAX,
    BinaryPayload,
    EventRecord,
    JournalKey,
    JsonPayload,
    Payload,
    TextPayload,
)


@dataclass(frozen=True, slots=True)
class JournalMeta:
    """What the store knows of one journal.

    `seq_nr`: the last seqNr appended (since the last purge), None before the first append.
    `delete_to`: every event at or below it is deleted, None if nothing is.
    `offset`: the offset of the last action of this journal that was replicated.
    `segment_size`: how the store splits this journal, for stores that do (opaque otherwise).
    `records_from`: the seqNr from which the journal's events are stored one row per Append,
    for stores that keep older ones otherwise (the Cassandra store's schema version 4: those
    below it in version 3's `events` rows; opaque otherwise).
    `base`: a journal moved here by a grow (docs/growing.md): the last seqNr of its events in
    the old topic, read there up to this seqNr (above this row's deleteTo); 0 when it has none
    there (never moved, or purged here since).
    """

    partition: int
    offset: int
    seq_nr: int | None = None
    delete_to: int | None = None
    segment_size: int | None = None
    records_from: int = 1
    base: int = 0

    @property
    def state(self) -> JournalState:
        """The fold's state this row records."""
        return JournalState(self.offset, self.seq_nr or 0, self.delete_to or 0)


@dataclass(frozen=True, slots=True)
class FirstPage:
    """Stored events from `from_` on, in order, read before the journal's metadata was known.

    They come from the segment a journal of `segment_size` keeps `from_` in, so they count only
    for a journal of that segment size. Being older than the metadata, they may lack events
    replicated since, and hold rows at or below a deleteTo or above the last seqNr: a reader
    keeps the run that continues what it has (a journal's stored events have no holes) and
    reads the rest with `read`.
    """

    segment_size: int
    events: tuple[EventRecord, ...]

    def fits(self, meta: JournalMeta) -> bool:
        return meta.segment_size in (None, self.segment_size)


@dataclass(frozen=True, slots=True)
class StoredAppend:
    """An Append replication stored: where it lies in the log and which seqNrs it brought.

    The fold accepted it, so a subscription delivers it without folding again
    (`journal.subscriptions.subscription`). `segment_size`: how the store split its journal then.
    """

    key: JournalKey
    partition: int
    offset: int
    first: int
    last: int
    segment_size: int | None = None


class EventualJournal(ABC):
    """The read side of the eventual store."""

    @abstractmethod
    async def pointer(self, topic: str, partition: int) -> int | None:
        """The offset of the last record of `partition` that replication has applied."""

    @abstractmethod
    async def pointers(self, topic: str) -> dict[int, int]:
        """All partitions' pointers of a topic."""

    @abstractmethod
    async def grow(self, topic: str) -> Grow | None:
        """The registry's record of a grow of `topic`, None when none was planned
        (docs/growing.md): where a reader learns a partition's cut."""

    @abstractmethod
    async def meta(self, key: JournalKey) -> JournalMeta | None:
        """The journal's metadata, or None for a journal the store does not know."""

    @abstractmethod
    def read(
        self,
        key: JournalKey,
        meta: JournalMeta,
        from_: int = 1,
        to: int = SEQ_NR_MAX,
    ) -> AsyncIterator[EventRecord]:
        """Stream the journal's events in [from_, to] above `meta.delete_to`, in order.

        `meta` comes from a preceding `meta()` call: the caller decides how fresh it must be.
        """

    async def read_pages(
        self,
        key: JournalKey,
        meta: JournalMeta,
        from_: int = 1,
        to: int = SEQ_NR_MAX,
        opener: Opener | None = None,
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, a non-empty list of events at a time as the store fetches them (a store
        without pages: an event at a time); with the `opener` of the journal's data key, their
        sealed payloads opened (a store that decodes: as it decodes, each event built once)."""
        last = OpenedAppend()  # each Append's envelope opened once
        async for record in self.read(key, meta, from_, to):
            yield [record] if opener is None else opener.records([record], last)

    def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        """The stored Appends of `partition` at offsets in (after, to], in offset order,
        streamed. Subscriptions need it; a store without it serves only journal reads."""
        raise NotImplementedError(f"{type(self).__name__} lists no stored Appends")

    def append_events(
        self, append: StoredAppend, opener: Opener | None = None
    ) -> AsyncIterator[EventRecord]:
        """The events of `append` the store still holds (none once deleted or purged), in
        seqNr order; with the `opener` of its journal's data key, opened as `read_pages`'
        are (EnvelopeRefused if they do not open)."""
        raise NotImplementedError(f"{type(self).__name__} lists no stored Appends")

    @abstractmethod
    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        """Up to `limit` ids of the topic's stored journals that exist (`JournalState.exists`)
        starting with `prefix`, above `after`, ascending (by code point)."""

    async def first_page(
        self, key: JournalKey, from_: int, to: int, opener: Opener | None = None
    ) -> FirstPage:
        """The first page of the journal's stored events from `from_`, asked before its
        metadata is known (so a read needs one round trip, not two): the caller keeps what
        its metadata allows and reads the rest with `read`; opened with `opener` as
        `read_pages`' are. The default reads nothing ahead."""
        return FirstPage(0, ())


class ReplicatedJournal(ABC):
    """The write side of the eventual store, fed by replication only."""

    @abstractmethod
    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        """The rows the store holds of `keys` (journals it does not know are left out): what
        replication folds a batch onto, and keeps (`journal.replication.replicate.StoredRows`)
        so that the next batch needs no read."""

    @abstractmethod
    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        """Apply the folded writes of one batch (any order across journals); the rows they
        leave, for the journals they change. `stored` holds the rows the writes were folded
        onto (from `stored` or an earlier `apply`; a new journal has none)."""

    @abstractmethod
    async def remove(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        """Remove what `writes` remove (their events, and the `appends` rows of the Appends
        they remove wholly), as `apply` does, leaving the rows and the listing as they are: a
        grown topic's replication removes a moved journal's events from an older topic's rows
        so (`journal.core.fold.removed_in_older`). `stored`: the rows they were made from."""

    @abstractmethod
    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        """Record that every record of `partition` up to `offset` is applied."""


def states(stored: Mapping[JournalKey, JournalMeta]) -> dict[JournalKey, JournalState]:
    """The fold's states of stored rows (`journal.core.fold.fold_batch` takes these)."""
    return {key: meta.state for key, meta in stored.items()}


def base_after(write: JournalWrite, stored: JournalMeta | None) -> int:
    """A row's `base` after `write`: a Purge ends it; a journal's first row takes it from
    the state the batch was folded onto, which is 0 unless replication of a grown topic's
    successor took a moved journal's state from the old topic (`rebased`); else the row's."""
    if write.purge is not None:
        return 0
    return write.before.seq_nr if stored is None else stored.base


async def moved_bases(
    rows: Callable[[list[JournalKey]], Awaitable[Mapping[JournalKey, JournalMeta]]],
    topic: str,
    ids: Collection[str],
    moved_from: Sequence[str],
) -> dict[JournalKey, JournalState]:
    """The journals `ids` of a grown topic's successor `topic` that have a row in one of its
    predecessors (`moved_from`, nearest first): their state in the nearest, as their base in
    `topic` (`rebased`). `rows` reads rows by key (replication's batch read, a reader's)."""
    missing = set(ids)
    bases: dict[JournalKey, JournalState] = {}
    for old in moved_from:
        if not missing:
            break
        found = await rows([JournalKey(old, id_) for id_ in missing])
        for key, row in found.items():
            bases[JournalKey(topic, key.id)] = rebased(row.state)
            missing.discard(key.id)
    return bases


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A journal's state up to `seq_nr`, as its writer encoded it, put at `timestamp`.

    `mark`: the offset of the Mark the put produced in the journal's partition. The put saw
    the journal as of that Mark, so the snapshot is void if a Purge of the journal follows
    the Mark in the log (`journal.client.snapshots`).
    """

    seq_nr: int
    payload: Payload
    timestamp: datetime
    mark: int


def snapshot_bytes(payload: Payload) -> tuple[str, bytes]:
    """A snapshot payload as the store keeps it: its kind and its bytes (whose length the
    size limit counts)."""
    match payload:
        case JsonPayload(text):
            return "json", text
        case TextPayload(value):
            return "text", value.encode("utf-8")
        case BinaryPayload(value):
            return "binary", value


def snapshot_payload(kind: str, data: bytes) -> Payload:
    """The payload `snapshot_bytes` made `kind` and `data` of."""
    if kind == "json":
        return JsonPayload(data)
    if kind == "text":
        return TextPayload(data.decode("utf-8"))
    return BinaryPayload(data)


class SnapshotStore(ABC):
    """Snapshots of journals. Each write is stamped with the offset of a Mark (or, for a
    Purge, of the Purge) + 1, like replication's writes: later in the log wins."""

    @property
    @abstractmethod
    def max_snapshot_bytes(self) -> int:
        """The largest payload (`snapshot_bytes`) a snapshot may have."""

    @abstractmethod
    async def put_snapshot(self, key: JournalKey, snapshot: Snapshot) -> None:
        """Store `snapshot`, replacing the one at its seqNr if that one's Mark is earlier.
        Readers see it whole or not at all. SnapshotTooLarge past `max_snapshot_bytes`."""

    @abstractmethod
    async def latest_snapshot(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Snapshot | None:
        """The snapshot with the highest seqNr at or below `max_seq_nr` among those whose
        Mark lies strictly between the offsets `after` and `before`."""

    @abstractmethod
    async def delete_snapshots(self, key: JournalKey, to: int, mark: int) -> None:
        """Remove the snapshots at or below seqNr `to` put with a Mark before `mark`."""


class EventualStore(EventualJournal, ReplicatedJournal, SnapshotStore, ABC):
    """A store with both sides, as one implementation usually provides them, and the
    journals' snapshots. Its `apply` of a write with a Purge also removes the journal's
    snapshots put with a Mark before that Purge."""

    @abstractmethod
    async def recorded_partitions(self, topic: str, partitions: int) -> int | None:
        """The partition count recorded for `topic`, recording `partitions` first if none is
        (idempotent: the first to record wins; journal/kafka/guard.py); None when this store
        cannot record one (a keyspace of an earlier version, not upgraded)."""

    # The registry of a grow (docs/growing.md, journal/store/grow.py).

    @abstractmethod
    async def record_plan(self, topic: str, new_topic: str, partitions: int) -> Grow:
        """Record a grow's plan unless one is recorded (the first wins); the record then."""

    @abstractmethod
    async def record_phase(self, topic: str, phase: Phase) -> None: ...

    @abstractmethod
    async def record_low(self, topic: str, partition: int, offset: int) -> None:
        """An old partition's end just before the command seals it."""

    @abstractmethod
    async def record_cut(self, topic: str, partition: int, offset: int) -> None:
        """An old partition's cut: the offset of its first Seal."""

    @abstractmethod
    async def deadlines_carried(self, topic: str, app: str, partition: int) -> bool:
        """Whether `app`'s workers carried the expiry candidates set before the move into
        their tables of `topic`'s `partition` (docs/growing.md, "Deadlines set before the
        move")."""

    @abstractmethod
    async def record_deadlines_carried(self, topic: str, app: str, partition: int) -> None: ...

    async def close(self) -> None:
        """Release connections; the default has nothing to release."""
