"""The per-journal audit against an in-memory store: each kind of difference, and none."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from msgspec.structs import replace as struct_replace

from journal.codec.actions import events_of
from journal.core.fold import JournalState, fold_batch
from journal.core.model import (
    SEQ_NR_MAX,
    ActionRecord,
    EventRecord,
    JournalKey,
    TextPayload,
)
from journal.store.base import EventualJournal, JournalMeta
from journal.store.memory import MemoryStore
from pipeline.audit_check import Difference, JournalAudit
from tests.support.actions import append, delete, mark, purge
from tests.support.stores import DelegatingJournal

KEY = JournalKey("topic", "id")


class Damaged(DelegatingJournal):
    """A MemoryStore's read side with rows dropped, replaced or added, or another row."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.dropped: set[int] = set()
        self.changed: dict[int, EventRecord] = {}
        self.extra: dict[int, EventRecord] = {}
        self.meta_of: JournalMeta | None = None
        self.row_missing = False

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        if self.row_missing:
            return None
        return self.meta_of or await self.store.meta(key)

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        rows = {r.seq_nr: r async for r in self.store.read(key, meta, from_, to)}
        rows.update({s: r for s, r in self.extra.items() if from_ <= s <= to})
        rows.update({s: r for s, r in self.changed.items() if s in rows})
        for seq_nr in sorted(rows):
            if seq_nr not in self.dropped:
                yield rows[seq_nr]


async def replicated(records: Sequence[ActionRecord]) -> Damaged:
    """What replication stores of `records`: the fold of one batch, applied."""
    store = MemoryStore()
    await store.apply(fold_batch(records, {}), {})
    return Damaged(store)


async def audit(
    store: EventualJournal, records: Sequence[ActionRecord], complete: bool = True
) -> tuple[list[Difference], JournalAudit]:
    pointer = max(r.offset for r in records)
    journal = await JournalAudit.start(store, KEY, 0, pointer, complete)
    for record in records:
        await journal.add(record)
    return await journal.finish(), journal


def kinds(differences: Sequence[Difference]) -> list[str]:
    return [d.kind for d in differences]


async def row(store: EventualJournal, seq_nr: int) -> EventRecord:
    """The stored row of `seq_nr`, whatever deleteTo says."""
    rows = [r async for r in store.read(KEY, JournalMeta(0, 0, seq_nr), seq_nr, seq_nr)]
    assert len(rows) == 1
    return rows[0]


def stored_as(record: ActionRecord, seq_nr: int) -> EventRecord:
    """The row replication would store of `record`'s event `seq_nr` had it accepted it."""
    return next(e for e in events_of(record) if e.seq_nr == seq_nr)


RECORDS = [append(KEY, 0, 1, 3), append(KEY, 1, 4, 5), delete(KEY, 2, 2), mark(KEY, 3)]


async def test_a_consistent_journal_has_no_differences() -> None:
    differences, journal = await audit(await replicated(RECORDS), RECORDS)
    assert differences == []
    assert journal.exact and journal.events_checked == 3  # 3, 4, 5: 1 and 2 are deleted


async def test_a_removed_and_a_changed_event_are_found() -> None:
    store = await replicated(RECORDS)
    store.dropped.add(4)
    stored = await row(store.store, 5)
    store.changed[5] = struct_replace(
        stored, event=struct_replace(stored.event, payload=TextPayload("x"))
    )
    differences, _ = await audit(store, RECORDS)
    assert [(d.kind, d.detail.split(" (")[0]) for d in differences] == [
        ("missing_event", "seqNr 4"),
        ("different_event", "seqNr 5"),
    ]
    assert "payload" in differences[1].detail


async def test_events_outliving_a_delete_or_a_purge_are_found() -> None:
    wholly = [append(KEY, 0, 1, 2), append(KEY, 1, 3, 5), delete(KEY, 2, 2)]
    store = await replicated(wholly)
    store.extra[1] = stored_as(wholly[0], 1)  # as the first Append wrote it before the Delete
    differences, _ = await audit(store, wholly)
    assert kinds(differences) == ["deleted_event_stored"]
    # the Append holding deleteTo + 1 may be kept whole (Cassandra's row per Append): its
    # events at or below deleteTo, hidden from reads, are no difference; another's are
    store = await replicated(RECORDS)
    store.extra[1], store.extra[2] = stored_as(RECORDS[0], 1), stored_as(RECORDS[0], 2)
    assert (await audit(store, RECORDS))[0] == []
    store.extra[1] = stored_as(append(KEY, 9, 1, 1), 1)
    differences, _ = await audit(store, RECORDS)
    assert [(d.kind, d.detail.split(" outlived")[0]) for d in differences] == [
        ("deleted_event_stored", "seqNr 1 (offset 9)")
    ]

    purged = [append(KEY, 0, 1, 5), purge(KEY, 1), append(KEY, 2, 1, 2)]
    store = await replicated(purged)
    assert (await audit(store, purged))[0] == []
    store.extra[4] = stored_as(purged[0], 4)  # from before it
    differences, _ = await audit(store, purged)
    assert kinds(differences) == ["purged_event_stored"]


async def test_the_journal_row_is_checked() -> None:
    store = await replicated(RECORDS)
    store.row_missing = True
    assert kinds((await audit(store, RECORDS))[0]) == ["journal_missing"]
    store = await replicated(RECORDS)
    store.meta_of = JournalMeta(0, 2, seq_nr=4, delete_to=1)
    row_differs, *then = (await audit(store, RECORDS))[0]
    assert (row_differs.kind, row_differs.detail) == (
        "journal_differs",
        "seqNr 4, deleteTo 1, offset 2; Kafka: seqNr 5, deleteTo 2, offset 2",
    )
    assert kinds(then) == ["missing_event"]  # seqNr 2, above the row's wrong deleteTo


async def test_a_rejected_append_takes_no_effect_and_must_not_be_stored() -> None:
    # A appends 1-3; B, from an older view, appends 1-2 after it: the log says A won.
    a = append(KEY, 0, 1, 3)
    rival = [a, append(KEY, 1, 1, 2), append(KEY, 2, 4, 4)]
    store = await replicated(rival)
    differences, journal = await audit(store, rival)
    assert differences == [] and journal.events_checked == 4  # A's 1-3 and 4
    # Last write wins (what the store did before the conflict rule): B's rows over A's.
    store.changed[1] = stored_as(rival[1], 1)
    store.changed[2] = stored_as(rival[1], 2)
    differences, _ = await audit(store, rival)
    assert kinds(differences) == ["different_event", "different_event", "rejected_event_stored"]
    assert "offset: Kafka 0, stored 1" in differences[0].detail
    # A rival ahead of the journal (it skips seqNrs) leaves nothing either.
    ahead = [a, append(KEY, 1, 5, 6)]
    store = await replicated(ahead)
    assert (await audit(store, ahead))[0] == []
    store.extra[5] = stored_as(ahead[1], 5)
    assert kinds((await audit(store, ahead))[0]) == ["rejected_event_stored"]


async def test_a_retried_append_is_a_no_op() -> None:
    first = append(KEY, 0, 1, 3)
    retried = [
        first,
        struct_replace(first, offset=1),
        append(KEY, 2, 4, 4),
        struct_replace(first, offset=3),
    ]
    store = await replicated(retried)
    meta = await store.meta(KEY)
    assert meta is not None and (meta.seq_nr, meta.offset) == (4, 2)
    differences, journal = await audit(store, retried)
    assert differences == [] and journal.events_checked == 4
    # The retry's rows stored over the original's: the same events from another offset.
    store.changed[2] = stored_as(retried[1], 2)
    differences, _ = await audit(store, retried)
    assert kinds(differences) == ["different_event", "rejected_event_stored"]
    assert "duplicate" in differences[1].detail


async def test_checks_voided_by_a_later_purge_are_dropped() -> None:
    records = [append(KEY, 0, 1, 4), purge(KEY, 1), append(KEY, 2, 1, 2), purge(KEY, 3)]
    records += [append(KEY, 4, 1, 1)]
    store = await replicated(records)
    differences, journal = await audit(store, records)
    assert differences == [] and journal.events_checked == 1
    store.dropped.add(1)
    assert kinds((await audit(store, records))[0]) == ["missing_event"]


async def test_without_the_journal_start_a_held_purge_makes_the_audit_exact() -> None:
    # Retention took offsets below 10: the journal had events 1-7 there, then was purged.
    records = [purge(KEY, 10), append(KEY, 11, 1, 2), delete(KEY, 12, 1)]
    store = await replicated(records)
    differences, journal = await audit(store, records, complete=False)
    assert differences == [] and journal.exact and journal.events_checked == 1
    store.dropped.add(2)
    assert kinds((await audit(store, records, complete=False))[0]) == ["missing_event"]


async def test_without_the_journal_start_the_store_state_is_the_base() -> None:
    # Offsets below 10 expired: they held 1-5 (and whatever else). Kafka keeps a Delete and an
    # Append, whose acceptance depends on the lost history: only the store's state can say.
    history = [append(KEY, 0, 1, 5)]
    held = [delete(KEY, 10, 2), append(KEY, 11, 6, 7), mark(KEY, 12)]
    store = await replicated(history + held)
    differences, journal = await audit(store, held, complete=False)
    assert differences == [] and not journal.exact
    # A row that missed the held Append (as of the Delete only): the held records change it.
    store.meta_of = JournalMeta(0, 10, seq_nr=5, delete_to=2)
    (difference,) = (await audit(store, held, complete=False))[0]
    assert (difference.kind, difference.detail) == (
        "journal_differs",
        "the action at offset 11 (appended) is not in the row (offset 10)",
    )
    # Whatever the base, no row may lie at or below the store's deleteTo.
    store = await replicated(history + held)
    store.extra[2] = stored_as(append(KEY, 9, 2, 2), 2)  # not of the Append holding 3
    assert kinds((await audit(store, held, complete=False))[0]) == ["deleted_event_stored"]


async def test_a_journal_replicated_past_the_pointer_is_skipped() -> None:
    store = await replicated([*RECORDS, append(KEY, 9, 6, 6)])
    differences, journal = await audit(store, RECORDS)
    assert differences == [] and journal.skipped


async def test_records_after_the_cut_are_moved_and_must_not_be_stored() -> None:
    # a grow cut the partition at offset 1 (its first Seal, another journal's record): the
    # Append after it is MOVED (its writer redid it in the grown topic), as replication said
    records = [append(KEY, 0, 1, 2), append(KEY, 2, 3, 3)]
    store = MemoryStore()
    await store.apply(fold_batch(records, {}, cut=1), {})
    cut_store = Damaged(store)
    journal = await JournalAudit.start(cut_store, KEY, 0, 2, True, cut=1)
    for record in records:
        await journal.add(record)
    assert await journal.finish() == [] and journal.events_checked == 2
    # without the cut the audit takes the store for having lost an accepted Append
    assert kinds((await audit(cut_store, records))[0]) != []


async def test_events_a_delete_in_the_grown_topic_removed_here_are_no_difference() -> None:
    # a journal moved by a grow (cut at offset 2) was deleted to 2 in the grown topic, whose
    # replication removed its first Append here too (`removed_in_older`)
    records = [append(KEY, 0, 1, 2), append(KEY, 1, 3, 3)]
    store = MemoryStore()
    await store.apply(fold_batch(records, {}, cut=2), {})
    grown = JournalKey("topic.2", KEY.id)
    moved = {grown: JournalState(-1, 3, 0)}  # its base: its state here (`rebased`)
    await store.apply(fold_batch([append(grown, 0, 4, 4), delete(grown, 1, 2)], moved), {})
    row = await store.meta(grown)
    assert row is not None and (row.base, row.delete_to) == (3, 2)
    removed = Damaged(store)
    removed.dropped = {1, 2}

    async def audited(grown_into: tuple[str, ...]) -> list[str]:
        journal = await JournalAudit.start(removed, KEY, 0, 1, True, 2, grown_into=grown_into)
        for record in records:
            await journal.add(record)
        return kinds(await journal.finish())

    assert await audited(("topic.2",)) == []
    # without the grown topic's row the audit takes them for lost
    assert await audited(()) == ["missing_event", "missing_event"]
