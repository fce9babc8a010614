"""The replication fold against a plain model: actions applied one by one, in order."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from journal.fold import DeleteTo, fold
from journal.model import ActionRecord, Event, JournalKey
from journal.store.memory import MemoryStore
from tests.support import actions as a

KEYS = [JournalKey("t", name) for name in ("a", "b", "c")]
A = KEYS[0]


@dataclass
class ModelJournal:
    seq_nr: int | None = None
    delete_to: int | None = None
    events: dict[int, Event] = field(default_factory=dict)


def run_model(records: list[ActionRecord]) -> dict[JournalKey, ModelJournal]:
    from journal.model import AppendHeader, DeleteHeader, PurgeHeader

    journals: dict[JournalKey, ModelJournal] = {}
    for record in records:
        journal = journals.setdefault(record.key, ModelJournal())
        header = record.header
        if isinstance(header, AppendHeader):
            for n in range(header.range.from_, header.range.to + 1):
                journal.events[n] = a.event(n)
            journal.seq_nr = header.range.to
        elif isinstance(header, DeleteHeader):
            journal.delete_to = max(header.to, journal.delete_to or 0)
        elif isinstance(header, PurgeHeader):
            journals[record.key] = ModelJournal()
    for journal in journals.values():
        if journal.delete_to is not None:
            journal.events = {n: e for n, e in journal.events.items() if n > journal.delete_to}
    return journals


@st.composite
def workloads(draw: st.DrawFn) -> list[ActionRecord]:
    """Actions over three journals as writers produce them: consecutive seqNrs per journal."""
    seq_nrs: dict[JournalKey, int] = {}
    records: list[ActionRecord] = []
    for offset in range(draw(st.integers(0, 40))):
        key = draw(st.sampled_from(KEYS))
        last = seq_nrs.get(key, 0)
        kind = draw(st.sampled_from(["append", "append", "delete", "purge", "mark"]))
        if kind == "append":
            count = draw(st.integers(1, 4))
            records.append(a.append(key, offset, last + 1, last + count))
            seq_nrs[key] = last + count
        elif kind == "delete" and last > 0:
            records.append(a.delete(key, offset, draw(st.integers(1, last + 2))))
        elif kind == "purge":
            records.append(a.purge(key, offset))
            seq_nrs[key] = 0
        else:
            records.append(a.mark(key, offset))
    return records


async def store_state(store: MemoryStore) -> dict[JournalKey, ModelJournal]:
    state = {}
    for key in KEYS:
        meta = await store.meta(key)
        if meta is None:
            continue
        events = {r.seq_nr: r.event async for r in store.read(key, meta)}
        state[key] = ModelJournal(meta.seq_nr, meta.delete_to, events)
    return state


def visible(state: dict[JournalKey, ModelJournal]) -> dict[JournalKey, ModelJournal]:
    """Journals a reader can tell apart from an unknown one."""
    return {k: j for k, j in state.items() if j.seq_nr is not None or j.delete_to is not None}


def apply_batches(batches: list[list[ActionRecord]]) -> dict[JournalKey, ModelJournal]:
    async def go() -> dict[JournalKey, ModelJournal]:
        store = MemoryStore()
        for batch in batches:
            await store.apply(fold(batch))
        return await store_state(store)

    return asyncio.run(go())


def split(records: list[ActionRecord], cuts: list[int]) -> list[list[ActionRecord]]:
    bounds = sorted({0, len(records), *(c % (len(records) + 1) for c in cuts)})
    return [records[i:j] for i, j in itertools.pairwise(bounds)]


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_one_batch_equals_the_model(records: list[ActionRecord]) -> None:
    assert visible(apply_batches([records])) == visible(run_model(records))


@settings(max_examples=200, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6))
def test_any_batching_equals_the_model(records: list[ActionRecord], cuts: list[int]) -> None:
    assert visible(apply_batches(split(records, cuts))) == visible(run_model(records))


@settings(max_examples=200, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6), st.data())
def test_replaying_a_batch_changes_nothing(
    records: list[ActionRecord], cuts: list[int], data: st.DataObject
) -> None:
    batches = split(records, cuts)
    if batches:
        again = data.draw(st.sampled_from(batches))
        batches = [*batches, again]
    assert visible(apply_batches(batches)) == visible(run_model(records))


def test_marks_vanish_and_leave_the_offset_alone() -> None:
    (write,) = fold([a.mark(A, 5), a.mark(A, 6)])
    assert not write.changes_store
    (write,) = fold([a.append(A, 4, 1, 1), a.mark(A, 5)])
    assert write.offset == 4  # so it is the same however the batches were cut


def test_a_purge_voids_what_came_before_it() -> None:
    (write,) = fold([a.append(A, 0, 1, 3), a.delete(A, 1, 2), a.purge(A, 2), a.append(A, 3, 1, 1)])
    assert write.purge == 2
    assert [r.offset for r in write.appends] == [3]
    assert write.delete is None


def test_deletes_collapse_and_drop_covered_appends() -> None:
    records = [a.append(A, 0, 1, 2), a.append(A, 1, 3, 5), a.delete(A, 2, 2), a.delete(A, 3, 4)]
    (write,) = fold(records)
    assert write.delete == DeleteTo(4, 3)
    assert [r.offset for r in write.appends] == [1]  # 1..2 is wholly deleted, 3..5 is not


def test_after_drops_what_is_applied() -> None:
    (write,) = fold([a.append(A, 0, 1, 1), a.purge(A, 1), a.append(A, 2, 1, 2)])
    assert write.after(2) is None
    rest = write.after(1)
    assert rest is not None and rest.purge is None and [r.offset for r in rest.appends] == [2]


@settings(max_examples=200, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6))
def test_the_stored_metadata_does_not_depend_on_batching(
    records: list[ActionRecord], cuts: list[int]
) -> None:
    """So the agents and a Spark rebuild, batching differently, store the same rows."""

    async def metas(batches: list[list[ActionRecord]]) -> list[object]:
        store = MemoryStore()
        for batch in batches:
            await store.apply(fold(batch))
        return [await store.meta(key) for key in KEYS]

    assert asyncio.run(metas(split(records, cuts))) == asyncio.run(metas([records]))
