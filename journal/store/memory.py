"""An eventual store in process memory: for unit tests and as the contract's plainest example."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from journal.codec.actions import events_of
from journal.codec.envelope import Opener
from journal.core.fold import JournalWrite, Removal
from journal.core.grow import Grow, Phase
from journal.core.model import SEQ_NR_MAX, EventRecord, JournalKey
from journal.errors import SnapshotTooLarge
from journal.store.base import (
    EventualStore,
    FirstPage,
    JournalMeta,
    Snapshot,
    StoredAppend,
    base_after,
    snapshot_bytes,
)
from journal.store.topology import DEFAULT_MAX_SNAPSHOT_BYTES


@dataclass(slots=True)
class _Journal:
    meta: JournalMeta
    events: dict[int, EventRecord] = field(default_factory=dict)


@dataclass(slots=True)
class _Snapshots:
    """A journal's snapshots with Cassandra's rule: the higher write stamp wins, a deletion
    winning a tie; `deleted` holds the deletions (up to seqNr, stamp) newer writes must pass."""

    by_seq_nr: dict[int, Snapshot] = field(default_factory=dict)
    deleted: list[tuple[int, int]] = field(default_factory=list)

    def put(self, snapshot: Snapshot) -> None:
        stamp = snapshot.mark + 1
        if any(snapshot.seq_nr <= to and stamp <= when for to, when in self.deleted):
            return
        current = self.by_seq_nr.get(snapshot.seq_nr)
        if current is None or current.mark < snapshot.mark:
            self.by_seq_nr[snapshot.seq_nr] = snapshot

    def delete(self, to: int, stamp: int) -> None:
        self.deleted.append((to, stamp))
        self.by_seq_nr = {
            s: snapshot
            for s, snapshot in self.by_seq_nr.items()
            if s > to or snapshot.mark + 1 > stamp
        }


class MemoryStore(EventualStore):
    SEGMENT_SIZE = 0  # it does not segment: its metas carry no segment size, so pages fit
    PAGE_SIZE = 1000

    def __init__(self, max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> None:
        self._journals: dict[JournalKey, _Journal] = {}
        self._pointers: dict[tuple[str, int], int] = {}
        self._appends: dict[tuple[str, int], dict[int, StoredAppend]] = {}
        self._snapshots: dict[JournalKey, _Snapshots] = {}
        self._max_snapshot_bytes = max_snapshot_bytes
        self._partition_counts: dict[str, int] = {}
        self._grows: dict[str, Grow] = {}
        self._carried: set[tuple[str, str, int]] = set()

    async def recorded_partitions(self, topic: str, partitions: int) -> int | None:
        return self._partition_counts.setdefault(topic, partitions)

    async def grow(self, topic: str) -> Grow | None:
        return self._grows.get(topic)

    async def record_plan(self, topic: str, new_topic: str, partitions: int) -> Grow:
        return self._grows.setdefault(topic, Grow(topic, new_topic, partitions, Phase.PLANNED))

    async def record_phase(self, topic: str, phase: Phase) -> None:
        self._grows[topic] = replace(self._grows[topic], phase=phase)

    async def record_low(self, topic: str, partition: int, offset: int) -> None:
        grow = self._grows[topic]
        self._grows[topic] = replace(grow, low={**grow.low, partition: offset})

    async def record_cut(self, topic: str, partition: int, offset: int) -> None:
        grow = self._grows[topic]
        self._grows[topic] = replace(grow, cut={**grow.cut, partition: offset})

    async def deadlines_carried(self, topic: str, app: str, partition: int) -> bool:
        return (topic, app, partition) in self._carried

    async def record_deadlines_carried(self, topic: str, app: str, partition: int) -> None:
        self._carried.add((topic, app, partition))

    async def pointer(self, topic: str, partition: int) -> int | None:
        return self._pointers.get((topic, partition))

    async def pointers(self, topic: str) -> dict[int, int]:
        return {p: o for (t, p), o in self._pointers.items() if t == topic}

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        journal = self._journals.get(key)
        return None if journal is None else journal.meta

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        journal = self._journals.get(key)
        if journal is None:
            return
        start = max(from_, (meta.delete_to or 0) + 1)
        for seq_nr in sorted(s for s in journal.events if start <= s <= to):
            event = journal.events.get(seq_nr)  # may vanish while the caller awaits
            if event is not None:
                yield event

    async def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        stored = self._appends.get((topic, partition), {})
        for offset in sorted(o for o in stored if after < o <= to):
            yield stored[offset]

    async def append_events(
        self, append: StoredAppend, opener: Opener | None = None
    ) -> AsyncIterator[EventRecord]:
        journal = self._journals.get(append.key)
        if journal is None:
            return
        found = [journal.events.get(seq_nr) for seq_nr in range(append.first, append.last + 1)]
        events = [e for e in found if e is not None and e.offset == append.offset]
        for event in events if opener is None else opener.records(events):
            yield event

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        ids = sorted(
            key.id
            for key, journal in self._journals.items()
            if key.topic == topic
            and journal.meta.state.exists
            and key.id.startswith(prefix)
            and (after is None or key.id > after)
        )
        return ids[:limit]

    async def first_page(
        self, key: JournalKey, from_: int, to: int, opener: Opener | None = None
    ) -> FirstPage:
        meta = await self.meta(key)
        if meta is None:
            return FirstPage(self.SEGMENT_SIZE, ())
        events = [r async for r in self.read(key, meta, from_, to)][: self.PAGE_SIZE]
        # it keeps its events decoded (sealed): opened as they are handed out
        return FirstPage(
            self.SEGMENT_SIZE, tuple(events if opener is None else opener.records(events))
        )

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        return {k: j.meta for k in keys if (j := self._journals.get(k)) is not None}

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        return {w.key: self._apply(w) for w in writes if w.changes_store}

    def _apply(self, write: JournalWrite) -> JournalMeta:
        journal = self._journals.get(write.key)
        base = base_after(write, None if journal is None else journal.meta)
        removal = write.removal
        if journal is not None and removal is not None:
            self._remove_appends(write, journal, removal)
        if write.purge is not None:
            self._snapshots_of(write.key).delete(SEQ_NR_MAX, write.purge + 1)
        if journal is None or write.purge is not None:
            journal = self._journals[write.key] = _Journal(JournalMeta(write.partition, -1))
        for append in write.appends:
            records = events_of(append)
            for record in records:
                journal.events[record.seq_nr] = record
            by_offset = self._appends.setdefault((write.key.topic, write.partition), {})
            by_offset[append.offset] = StoredAppend(
                write.key, write.partition, append.offset, records[0].seq_nr, records[-1].seq_nr
            )
        after = write.after
        journal.events = {s: e for s, e in journal.events.items() if s > after.delete_to}
        journal.meta = JournalMeta(
            write.partition, after.offset, after.seq_nr or None, after.delete_to or None, base=base
        )
        return journal.meta

    async def remove(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> None:
        for write in writes:
            journal = self._journals.get(write.key)
            if journal is None:
                continue
            removal = write.removal
            if removal is not None:
                self._remove_appends(write, journal, removal)
            if write.purge is not None:
                self._snapshots_of(write.key).delete(SEQ_NR_MAX, write.purge + 1)
                journal.events = {}
            else:
                to = write.after.delete_to
                journal.events = {s: e for s, e in journal.events.items() if s > to}

    def _remove_appends(self, write: JournalWrite, journal: _Journal, removal: Removal) -> None:
        """As the Cassandra store does: the offsets of the stored events in the removal's
        range, the last one's spared if the removal says so."""
        events = journal.events
        offsets = [e.offset for s in range(removal.first, removal.last + 1) if (e := events.get(s))]
        removed = dict.fromkeys(offsets)  # distinct, in order
        if removal.spares_last and offsets:
            del removed[offsets[-1]]
        by_offset = self._appends.get((write.key.topic, write.partition), {})
        for offset in removed:
            by_offset.pop(offset, None)

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        current = self._pointers.get((topic, partition), -1)
        self._pointers[(topic, partition)] = max(current, offset)

    @property
    def max_snapshot_bytes(self) -> int:
        return self._max_snapshot_bytes

    async def put_snapshot(self, key: JournalKey, snapshot: Snapshot) -> None:
        size = len(snapshot_bytes(snapshot.payload)[1])
        if size > self._max_snapshot_bytes:
            raise SnapshotTooLarge(
                f"the snapshot's payload is {size} bytes; the limit is {self._max_snapshot_bytes}"
            )
        self._snapshots_of(key).put(snapshot)

    async def latest_snapshot(
        self, key: JournalKey, max_seq_nr: int, after: int, before: int
    ) -> Snapshot | None:
        snapshots = self._snapshots_of(key).by_seq_nr.values()
        candidates = [s for s in snapshots if s.seq_nr <= max_seq_nr and after < s.mark < before]
        return max(candidates, key=lambda s: s.seq_nr, default=None)

    async def delete_snapshots(self, key: JournalKey, to: int, mark: int) -> None:
        self._snapshots_of(key).delete(to, mark + 1)

    def _snapshots_of(self, key: JournalKey) -> _Snapshots:
        return self._snapshots.setdefault(key, _Snapshots())
