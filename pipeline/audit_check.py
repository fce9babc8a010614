"""Auditing one journal: its replicated Kafka records, newest first, against the store.

Contract: a `JournalAudit` is fed the journal's parsed records of one partition with offsets
at or below the partition's replicated pointer, newest first (`add`), then `finish` lists the
differences. Newest first lets it decide with constant state per journal, streaming:
- everything before the newest Purge is void (and must be gone from the store);
- the highest Delete after it gives the Kafka deleteTo; the newest Append the last seqNr;
- every event of an Append after the Purge and above deleteTo (the higher of Kafka's and the
  store's: a Delete may predate retention) must be stored with identical content, unless a
  newer Append rewrote its seqNr (that one is checked instead);
- the journal's row: its partition, last seqNr and deleteTo as Kafka says, its offset at
  least the newest replicated record that changed the store and at most the pointer;
- no stored event older than the Purge, nor at or below deleteTo and older than the Delete.
`complete` says Kafka still holds the partition from offset 0: then deleteTo must be equal,
not merely covered. A journal whose row is newer than the pointer (replication moved on
while the audit read) is skipped: its differences would be the audit's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, fields

from journal.actions import events_of
from journal.model import (
    SEQ_NR_MAX,
    ActionRecord,
    AppendHeader,
    DeleteHeader,
    EventRecord,
    JournalKey,
    MarkHeader,
    PurgeHeader,
)
from journal.store.base import EventualJournal, JournalMeta

MAX_DIFFERENCES_PER_JOURNAL = 3


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the store differs from Kafka. `kind` is a snake_case word (see `KINDS`)."""

    journal: str
    kind: str
    detail: str


KINDS = (
    "journal_missing",  # the store has no row for a journal Kafka has replicated records of
    "journal_differs",  # the row's partition, seqNr, deleteTo or offset disagree with Kafka
    "missing_event",  # an event Kafka says is stored is not
    "different_event",  # an event is stored with other content than Kafka's
    "purged_event_stored",  # an event older than a replicated Purge is still stored
    "deleted_event_stored",  # an event at or below a replicated Delete is still stored
    "pointer",  # a partition's pointer is past Kafka's end or behind what Kafka still holds
)


class JournalAudit:
    """The audit of one journal; see the module contract."""

    def __init__(
        self,
        store: EventualJournal,
        key: JournalKey,
        partition: int,
        pointer: int,
        complete: bool,
        meta: JournalMeta | None,
    ) -> None:
        self._store = store
        self._key = key
        self._partition = partition
        self._pointer = pointer
        self._complete = complete
        self._meta = meta
        self.skipped = meta is not None and meta.offset > pointer
        self.differences: list[Difference] = []
        self.difference_count = 0
        self.events_checked = 0
        self._purge: int | None = None  # offset of the newest Purge
        self._delete_to: int | None = None  # the highest Delete after it...
        self._delete_offset = -1  # ...and its offset
        self._seq_nr: int | None = None  # the newest Append's last seqNr after the Purge
        self._checked_below = SEQ_NR_MAX  # seqNrs at or above this were checked already
        self._newest_change: int | None = None  # offset of the newest non-Mark record
        self._highest_seq_nr = 0  # over every Append seen, Purge or not

    @classmethod
    async def start(
        cls,
        store: EventualJournal,
        key: JournalKey,
        partition: int,
        pointer: int,
        complete: bool,
    ) -> JournalAudit:
        """Begin: read the journal's row from the store."""
        return cls(store, key, partition, pointer, complete, await store.meta(key))

    async def add(self, record: ActionRecord) -> None:
        """The next older replicated record of this journal."""
        header = record.header
        if self.skipped or isinstance(header, MarkHeader):
            return
        if self._newest_change is None:
            self._newest_change = record.offset
        if isinstance(header, AppendHeader):
            self._highest_seq_nr = max(self._highest_seq_nr, header.range.to)
        if self._purge is not None:
            return  # void
        if isinstance(header, PurgeHeader):
            self._purge = record.offset
        elif isinstance(header, DeleteHeader):
            if self._delete_to is None or header.to > self._delete_to:
                self._delete_to, self._delete_offset = header.to, record.offset
        elif isinstance(header, AppendHeader):
            if self._seq_nr is None:
                self._seq_nr = header.range.to
            await self._check_events(record)

    async def finish(self) -> list[Difference]:
        """The differences found (the first few; `difference_count` counts all)."""
        if self.skipped or self._newest_change is None:
            return self.differences  # nothing that changes the store was replicated
        meta = self._meta
        if meta is None:
            self._differ("journal_missing", "no journals row")
            return self.differences
        self._check_row(meta)
        if self._purge is not None or self._delete_to is not None:
            await self._check_removed(meta)
        return self.differences

    def _differ(self, kind: str, detail: str) -> None:
        self.difference_count += 1
        if len(self.differences) < MAX_DIFFERENCES_PER_JOURNAL:
            self.differences.append(Difference(str(self._key), kind, detail))

    def _effective_delete_to(self) -> int:
        stored = None if self._meta is None else self._meta.delete_to
        return max(self._delete_to or 0, stored or 0)

    async def _check_events(self, append: ActionRecord) -> None:
        if self._meta is None:
            return  # reported once, as journal_missing
        low = self._effective_delete_to()
        expected = [e for e in events_of(append) if low < e.seq_nr < self._checked_below]
        assert isinstance(append.header, AppendHeader)
        self._checked_below = min(self._checked_below, append.header.range.from_)
        if not expected:
            return
        rows = self._stored(expected[0].seq_nr, expected[-1].seq_nr, self._meta)
        stored = {r.seq_nr: r async for r in rows}  # at most one Append's events
        for event in expected:
            self.events_checked += 1
            found = stored.get(event.seq_nr)
            where = f"seqNr {event.seq_nr} (offset {append.offset})"
            if found is None:
                self._differ("missing_event", f"{where} is not stored")
            elif found != event:
                self._differ("different_event", f"{where}: {_changed(event, found)}")

    def _check_row(self, meta: JournalMeta) -> None:
        if meta.partition != self._partition:
            self._differ("journal_differs", f"partition {meta.partition}, Kafka {self._partition}")
        seq_nr_known = self._seq_nr is not None or self._purge is not None
        if seq_nr_known and meta.seq_nr != self._seq_nr:
            self._differ("journal_differs", f"seqNr {meta.seq_nr}, Kafka {self._seq_nr}")
        exact = self._complete or self._purge is not None
        stored_to = meta.delete_to
        if (self._delete_to is not None and (stored_to or 0) < self._delete_to) or (
            exact and stored_to != self._delete_to
        ):
            self._differ("journal_differs", f"deleteTo {stored_to}, Kafka {self._delete_to}")
        assert self._newest_change is not None
        if not self._newest_change <= meta.offset <= self._pointer:
            self._differ(
                "journal_differs",
                f"offset {meta.offset}, expected {self._newest_change}..{self._pointer}",
            )

    async def _check_removed(self, meta: JournalMeta) -> None:
        """No stored event older than the Purge, or covered by and older than the Delete."""
        top = max(self._highest_seq_nr, meta.seq_nr or 0, self._delete_to or 0)
        if top == 0:
            return
        async for row in self._stored(1, top, meta):
            if self._purge is not None and row.offset < self._purge:
                self._differ(
                    "purged_event_stored",
                    f"seqNr {row.seq_nr} (offset {row.offset}) outlived the purge at "
                    f"offset {self._purge}",
                )
            elif (
                self._delete_to is not None
                and row.seq_nr <= self._delete_to
                and row.offset < self._delete_offset
            ):
                self._differ(
                    "deleted_event_stored",
                    f"seqNr {row.seq_nr} (offset {row.offset}) outlived the delete to "
                    f"{self._delete_to} at offset {self._delete_offset}",
                )

    def _stored(self, first: int, last: int, meta: JournalMeta) -> AsyncIterator[EventRecord]:
        """Stream every stored row of seqNrs first..last, at or below deleteTo or not."""
        everything = JournalMeta(meta.partition, meta.offset, last, None, meta.segment_size)
        return self._store.read(self._key, everything, first, last)


def _changed(expected: EventRecord, stored: EventRecord) -> str:
    """Which fields of an event differ, e.g. 'event: Kafka ..., stored ...'."""
    parts = []
    for spec in fields(EventRecord):
        want, got = getattr(expected, spec.name), getattr(stored, spec.name)
        if want != got:
            parts.append(f"{spec.name}: Kafka {_short(want)}, stored {_short(got)}")
    return "; ".join(parts) or "differs"


def _short(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
