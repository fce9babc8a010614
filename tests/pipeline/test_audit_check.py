"""The per-journal audit against an in-memory store: each kind of difference, and none."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from journal.fold import fold
from journal.model import (
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

KEY = JournalKey("topic", "id")


class Damaged(EventualJournal):
    """A MemoryStore's read side with rows dropped, replaced or added, or another row."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.dropped: set[int] = set()
        self.changed: dict[int, EventRecord] = {}
        self.extra: dict[int, EventRecord] = {}
        self.meta_of: JournalMeta | None = None
        self.row_missing = False

    async def pointer(self, topic: str, partition: int) -> int | None:
        return await self.store.pointer(topic, partition)

    async def pointers(self, topic: str) -> dict[int, int]:
        return await self.store.pointers(topic)

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
    store = MemoryStore()
    await store.apply(fold(records))
    return Damaged(store)


async def audit(
    store: EventualJournal, records: Sequence[ActionRecord], complete: bool = True
) -> tuple[list[Difference], JournalAudit]:
    pointer = max(r.offset for r in records)
    journal = await JournalAudit.start(store, KEY, 0, pointer, complete)
    for record in reversed(records):
        await journal.add(record)
    return await journal.finish(), journal


async def row(store: EventualJournal, seq_nr: int) -> EventRecord:
    """The stored row of `seq_nr`, whatever deleteTo says."""
    rows = [r async for r in store.read(KEY, JournalMeta(0, 0, seq_nr), seq_nr, seq_nr)]
    assert len(rows) == 1
    return rows[0]


RECORDS = [append(KEY, 0, 1, 3), append(KEY, 1, 4, 5), delete(KEY, 2, 2), mark(KEY, 3)]


async def test_a_consistent_journal_has_no_differences() -> None:
    differences, journal = await audit(await replicated(RECORDS), RECORDS)
    assert differences == []
    assert journal.events_checked == 3  # 3, 4, 5: 1 and 2 are deleted


async def test_a_removed_and_a_changed_event_are_found() -> None:
    store = await replicated(RECORDS)
    store.dropped.add(4)
    stored = await row(store.store, 5)
    store.changed[5] = replace(stored, event=replace(stored.event, payload=TextPayload("x")))
    differences, _ = await audit(store, RECORDS)
    assert [(d.kind, d.detail.split(" (")[0]) for d in differences] == [
        ("missing_event", "seqNr 4"),
        ("different_event", "seqNr 5"),
    ]
    assert "payload" in differences[1].detail


async def test_events_outliving_a_delete_or_a_purge_are_found() -> None:
    store = await replicated(RECORDS)
    third = await row(store.store, 3)  # as the first Append wrote 1 before the Delete
    store.extra[1] = replace(third, event=replace(third.event, seq_nr=1), offset=0)
    differences, _ = await audit(store, RECORDS)
    assert [d.kind for d in differences] == ["deleted_event_stored"]

    purged = [append(KEY, 0, 1, 5), purge(KEY, 1), append(KEY, 2, 1, 2)]
    store = await replicated(purged)
    assert (await audit(store, purged))[0] == []
    store.extra[4] = await row((await replicated(purged[:1])).store, 4)  # from before it
    differences, _ = await audit(store, purged)
    assert [d.kind for d in differences] == ["purged_event_stored"]


async def test_the_journal_row_is_checked() -> None:
    store = await replicated(RECORDS)
    store.row_missing = True
    assert [d.kind for d in (await audit(store, RECORDS))[0]] == ["journal_missing"]
    store = await replicated(RECORDS)
    store.meta_of = JournalMeta(0, 3, seq_nr=4, delete_to=1)
    kinds = [(d.kind, d.detail) for d in (await audit(store, RECORDS))[0]]
    assert ("journal_differs", "seqNr 4, Kafka 5") in kinds
    assert ("journal_differs", "deleteTo 1, Kafka 2") in kinds


async def test_a_rewritten_seq_nr_is_checked_against_the_newest_append() -> None:
    records = [append(KEY, 0, 1, 3), append(KEY, 1, 3, 4)]  # a retried append repeats 3
    differences, journal = await audit(await replicated(records), records)
    assert differences == []
    assert journal.events_checked == 4


async def test_a_journal_replicated_past_the_pointer_is_skipped() -> None:
    store = await replicated([*RECORDS, append(KEY, 9, 6, 6)])
    differences, journal = await audit(store, RECORDS)
    assert differences == [] and journal.skipped
