"""Auditing one journal: its replicated Kafka records, in log order, against the store.

Contract: a `JournalAudit` is fed the journal's parsed records of one partition with offsets
at or below the partition's replicated pointer, oldest first (`add`), then `finish` lists the
differences. It interprets nothing itself: it folds the records with replication's own fold
(`journal.core.fold.JournalState.apply`) and checks the store against the fold's verdicts, with
constant state per journal (the fold's state, a few offsets, the first few differences) and
at most one Append's events in hand.

What the fold proves depends on where the journal's history starts in Kafka:
- **Exact** when the fold's base is known: the partition is held from offset 0 (`complete`),
  or from the journal's first Purge held in Kafka on (a Purge gives the same state whatever
  came before it). Then the store's row must be the fold's final state (seqNr, deleteTo and
  offset equal: the fold moves its offset only on a change, as the store does), every event
  of an accepted Append above deleteTo must be stored as Kafka has it (its offset included),
  and no event of a rejected Append (a rival's, or a retry's) may be stored.
- **Partial** otherwise: retention removed the start of the journal and no Purge followed,
  so the base is unknown. Which Appends took effect cannot be proven (an Append from seqNr 5
  continues the journal only if the lost history ended at 4, and a retry looks like a rival
  from there). The only witness of the lost history is the store's own state, so the audit
  takes it as the base: folded onto it, the records after the row's offset must change
  nothing (else the store missed a replicated action). Events are not compared.
In both cases the stored rows must not contradict the state (the fold's when exact, the
store's own when partial): no event older than a held Purge, none at or below deleteTo
(but those of the Append holding deleteTo + 1, which a store may keep whole, hidden from reads),
none above the last seqNr (looked for up to the highest seqNr the fold or the row reached;
a rejected Append's own rows are looked for where its seqNrs are, when exact).

The checks of an accepted or rejected Append are made as the fold reaches it, against what
is stored now, so a later Purge voids them: differences found between two Purges are held
(the first few, and a count) and dropped at the next Purge, whose leftovers the final scan
of stored rows finds instead. A journal whose row is newer than the pointer, or changes while
the audit reads it (replication moved on), is skipped: its differences would be the audit's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

from journal import SEQ_NR_MAX, EventRecord, JournalKey
from journal.codec import events_of
from journal.core import ActionRecord, JournalState, Verdict, rebased
from journal.store import EventualJournal, JournalMeta

MAX_DIFFERENCES_PER_JOURNAL = 3

CHANGES = (Verdict.APPENDED, Verdict.DELETED, Verdict.PURGED)


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the store differs from Kafka. `kind` is a snake_case word (see `KINDS`)."""

    journal: str
    kind: str
    detail: str


KINDS = (
    "journal_missing",  # the store has no row for a journal the replicated records changed
    "journal_differs",  # the row's partition, seqNr, deleteTo or offset disagree with Kafka
    "missing_event",  # an event of an accepted Append is not stored
    "different_event",  # an event is stored with other content than Kafka's
    "rejected_event_stored",  # a rejected Append's event, or one above the last seqNr, stored
    "purged_event_stored",  # an event older than a replicated Purge is still stored
    "deleted_event_stored",  # an event at or below the journal's deleteTo is still stored
    "two_partitions",  # Kafka holds a journal's records on more than one partition
    "pointer",  # a partition's pointer is past Kafka's end or behind what Kafka still holds
)


@dataclass(slots=True)
class Findings:
    """Differences (the first few, and how many) and events compared."""

    differences: list[Difference] = field(default_factory=list)
    count: int = 0
    events_checked: int = 0

    def add(self, difference: Difference) -> None:
        self.count += 1
        if len(self.differences) < MAX_DIFFERENCES_PER_JOURNAL:
            self.differences.append(difference)

    def merge(self, other: Findings) -> None:
        room = MAX_DIFFERENCES_PER_JOURNAL - len(self.differences)
        self.differences += other.differences[: max(0, room)]
        self.count += other.count
        self.events_checked += other.events_checked


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
        cut: int | None = None,
        base: JournalState = JournalState(),  # noqa: B008 (frozen: shared safely)
        removed_to: int = 0,
    ) -> None:
        self._store = store
        # moved by a grow: its events up to here were removed by a Delete or Purge in a later
        # topic of the chain (`removed_in_older`), so they need not be stored here
        self._removed_to = removed_to
        self._cut = cut  # the partition's cut by a grow: records after it are MOVED
        self._key = key
        self._partition = partition
        self._meta = meta
        self.skipped = meta is not None and meta.offset > pointer
        self._stored = base if meta is None else meta.state
        # a journal moved here by a grow starts from its state in the older topics
        self._base = base
        self._state = base  # the log's fold: its verdicts count once `exact`
        self.exact = complete
        self._on_stored = self._stored  # partial: the records folded onto the store's state
        self._purge: int | None = None  # offset of the last Purge
        self._top = 0  # the highest seqNr the exact fold reached, before a Purge too
        self._found = Findings()
        self._pending = Findings()  # since the last Purge: void if another Purge follows

    @classmethod
    async def start(
        cls,
        store: EventualJournal,
        key: JournalKey,
        partition: int,
        pointer: int,
        complete: bool,
        cut: int | None = None,
        moved_from: tuple[str, ...] = (),
        grown_into: tuple[str, ...] = (),
    ) -> JournalAudit:
        """Begin: read the journal's row from the store. `cut`: the partition's first Seal
        (docs/growing.md), which the registry holds once replication passed it; `moved_from`:
        the topic's predecessors, nearest first, when it is a grow's successor: the journal's
        row in the nearest one that has it is its base here (`rebased`); `grown_into`: the
        topics grown from this one, nearest first: their rows tell what a Delete or Purge
        there removed from this one's (`removed_in_older`)."""
        base = JournalState()
        for old in moved_from:
            row = await store.meta(JournalKey(old, key.id))
            if row is not None:
                base = rebased(row.state)
                break
        removed_to = 0
        for new in grown_into if cut is not None else ():
            row = await store.meta(JournalKey(new, key.id))
            if row is not None:  # base 0 there: purged since it moved, or never had events here
                removed_to = max(removed_to, SEQ_NR_MAX if row.base == 0 else row.delete_to or 0)
        meta = await store.meta(key)
        return cls(store, key, partition, pointer, complete, meta, cut, base, removed_to)

    @property
    def differences(self) -> list[Difference]:
        return self._found.differences

    @property
    def difference_count(self) -> int:
        return self._found.count

    @property
    def events_checked(self) -> int:
        return self._found.events_checked

    async def add(self, record: ActionRecord) -> None:
        """The next replicated record of this journal, in offset order."""
        if self.skipped:
            return
        if not self.exact:
            self._on_stored, change = self._on_stored.apply(record.header, record.offset, self._cut)
            if change in CHANGES:
                self._row_misses(record, change)
        self._state, verdict = self._state.apply(record.header, record.offset, self._cut)
        if verdict is Verdict.PURGED:
            self.exact, self._purge = True, record.offset
            self._pending = Findings()
        elif not self.exact:
            return
        self._top = max(self._top, self._state.seq_nr)
        if verdict is Verdict.APPENDED:
            await self._check_accepted(record)
        elif verdict.rejected:
            await self._check_rejected(record, verdict)

    async def finish(self) -> list[Difference]:
        """The differences found (the first few; `difference_count` counts all)."""
        if self.skipped:
            return []
        if await self._store.meta(self._key) != self._meta:
            self.skipped = True  # replication wrote the journal while the audit read it
            return []
        meta = self._meta
        if self.exact:
            self._check_row(meta, self._state)  # first: a wrong row explains what follows
        self._found.merge(self._pending)
        if meta is None:
            return self.differences
        if meta.partition != self._partition:
            self._differ("journal_differs", f"partition {meta.partition}, Kafka {self._partition}")
        await self._check_rows(meta, self._state if self.exact else self._stored)
        return self.differences

    def _differ(self, kind: str, detail: str, findings: Findings | None = None) -> None:
        (findings or self._found).add(Difference(str(self._key), kind, detail))

    def _row_misses(self, record: ActionRecord, change: Verdict) -> None:
        kind = "journal_missing" if self._meta is None else "journal_differs"
        self._differ(
            kind,
            f"the action at offset {record.offset} ({change.value}) is not in the row "
            f"(offset {self._stored.offset})",
        )

    def _check_row(self, meta: JournalMeta | None, expected: JournalState) -> None:
        """The row is the fold's final state (no row: the log never changed the journal)."""
        if meta is None:
            if expected != self._base:
                self._differ("journal_missing", f"no journals row; Kafka: {_state(expected)}")
            return
        if meta.state != expected:
            self._differ("journal_differs", f"{_state(meta.state)}; Kafka: {_state(expected)}")
        base = 0 if self._purge is not None else self._base.seq_nr
        if meta.base != base:  # where a moved journal's events in the older topics end
            self._differ("journal_differs", f"base {meta.base}; Kafka: base {base}")

    async def _check_accepted(self, append: ActionRecord) -> None:
        """Its events above the store's deleteTo are stored as Kafka has them.

        The store's deleteTo, not the fold's yet: the fold knows its final one only at the
        end, where the row is compared with it; when they agree, this filter was exact.
        """
        if self._meta is None:
            return  # reported once, as journal_missing
        low = max(self._stored.delete_to, self._removed_to)
        expected = [e for e in events_of(append) if e.seq_nr > low]
        if not expected:
            return
        rows = self._rows(expected[0].seq_nr, expected[-1].seq_nr)
        stored = {r.seq_nr: r async for r in rows}  # at most one Append's events
        for event in expected:
            self._pending.events_checked += 1
            found = stored.get(event.seq_nr)
            where = f"seqNr {event.seq_nr} (offset {append.offset})"
            if found is None:
                self._differ("missing_event", f"{where} is not stored", self._pending)
            elif found != event:
                self._differ("different_event", f"{where}: {_changed(event, found)}", self._pending)

    async def _check_rejected(self, append: ActionRecord, verdict: Verdict) -> None:
        """None of a rejected Append's events is stored (a row keeps its Append's offset)."""
        if self._meta is None:
            return
        events = events_of(append)
        async for row in self._rows(events[0].seq_nr, events[-1].seq_nr):
            if row.offset == append.offset:
                self._differ(
                    "rejected_event_stored",
                    f"seqNr {row.seq_nr} of the Append at offset {append.offset}, "
                    f"rejected ({verdict.value}), is stored",
                    self._pending,
                )

    async def _check_rows(self, meta: JournalMeta, expected: JournalState) -> None:
        """No stored event older than the last Purge, at or below deleteTo, above seqNr."""
        top = max(self._top, expected.seq_nr, meta.seq_nr or 0, meta.delete_to or 0)
        if top == 0:
            return
        # a store that keeps an Append whole (Cassandra's row per Append) keeps the events at
        # or below deleteTo of the Append holding deleteTo + 1, hidden from reads: those are
        # no difference, any other deleted event is
        deleted: list[EventRecord] = []
        async for row in self._rows(1, top):
            where = f"seqNr {row.seq_nr} (offset {row.offset})"
            if self._purge is not None and row.offset < self._purge:
                self._differ(
                    "purged_event_stored", f"{where} outlived the purge at offset {self._purge}"
                )
            elif row.seq_nr <= expected.delete_to:
                # held until deleteTo + 1 (or the end), one Append's at most: the events of an
                # earlier Append cannot be of the one holding deleteTo + 1
                if deleted and deleted[-1].offset != row.offset:
                    self._deleted_stored(deleted, expected.delete_to)
                    deleted = []
                deleted.append(row)
            elif row.seq_nr > expected.seq_nr:
                self._differ(
                    "rejected_event_stored",
                    f"{where} lies above the journal's last seqNr {expected.seq_nr}",
                )
            if deleted and row.seq_nr == expected.delete_to + 1:
                kept = [held for held in deleted if held.offset != row.offset]
                self._deleted_stored(kept, expected.delete_to)
                deleted = []
        self._deleted_stored(deleted, expected.delete_to)

    def _deleted_stored(self, rows: list[EventRecord], delete_to: int) -> None:
        for row in rows:
            where = f"seqNr {row.seq_nr} (offset {row.offset})"
            self._differ("deleted_event_stored", f"{where} outlived deleteTo {delete_to}")

    def _rows(self, first: int, last: int) -> AsyncIterator[EventRecord]:
        """Stream every stored row of seqNrs first..last, at or below deleteTo or not."""
        meta = self._meta
        assert meta is not None
        everything = replace(meta, seq_nr=last, delete_to=None)
        return self._store.read(self._key, everything, first, last)


def _state(state: JournalState) -> str:
    return f"seqNr {state.seq_nr}, deleteTo {state.delete_to}, offset {state.offset}"


def _changed(expected: EventRecord, stored: EventRecord) -> str:
    """Which fields of an event differ, e.g. 'event: Kafka ..., stored ...'."""
    parts = []
    for name in EventRecord.__struct_fields__:
        want, got = getattr(expected, name), getattr(stored, name)
        if want != got:
            parts.append(f"{name}: Kafka {_short(want)}, stored {_short(got)}")
    return "; ".join(parts) or "differs"


def _short(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
