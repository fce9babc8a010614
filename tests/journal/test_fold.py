"""The one fold against a plain sequential model, through every way the project uses it.

The workloads are what racing writers produce: Appends that continue the journal, repeat its
last one (a retry), or start anywhere else (a rival writer), plus Deletes, Purges and Marks.
Every user must agree with the model: replication in any batching (what the agents and the
Spark rebuild run), a read folding the unreplicated rest onto any replicated prefix, and Kafka
alone from offset 0.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

import msgspec
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.codec.actions import RawRecord, events_of
from journal.codec.envelope import EnvelopeRefused, Opener, Sealer, data_key_id, new_data_key
from journal.codec.events import encode_events
from journal.core.fold import (
    DeleteTo,
    JournalState,
    JournalWrite,
    Removal,
    Verdict,
    fold_batch,
    removed_in_older,
)
from journal.core.grow import SEAL_ID
from journal.core.model import (
    ActionRecord,
    AppendHeader,
    DeleteHeader,
    Event,
    Events,
    JournalKey,
    MarkHeader,
    PurgeHeader,
    SeqRange,
    TextPayload,
)
from journal.kafka.head import JournalHead, fold_head, fold_whole
from journal.replication.replicate import AlreadyQuarantined, Replicator
from journal.store.memory import MemoryStore
from tests.support import actions as a

KEYS = [JournalKey("t", name) for name in ("a", "b", "c")]
A = KEYS[0]


@dataclass
class ModelJournal:
    seq_nr: int = 0
    delete_to: int = 0
    events: dict[int, Event] = field(default_factory=dict)
    appends: list[tuple[int, int]] = field(default_factory=list)  # (offset, last seqNr)

    def visible(self) -> list[Event]:
        return [e for n, e in sorted(self.events.items()) if n > self.delete_to]


def run_model(records: Iterable[ActionRecord]) -> dict[JournalKey, ModelJournal]:
    """The rules of design.md, written as plainly as possible."""
    journals: dict[JournalKey, ModelJournal] = {}
    for record in records:
        journal = journals.setdefault(record.key, ModelJournal())
        header = record.header
        if isinstance(header, AppendHeader):
            if header.range.from_ == journal.seq_nr + 1:
                for event in events_of(record):
                    journal.events[event.seq_nr] = event.event
                journal.seq_nr = header.range.to
                journal.appends.append((record.offset, header.range.to))
        elif isinstance(header, DeleteHeader):
            journal.delete_to = max(journal.delete_to, min(header.to, journal.seq_nr))
        elif isinstance(header, PurgeHeader):
            journals[record.key] = ModelJournal()
    return journals


@st.composite
def workloads(draw: st.DrawFn) -> list[ActionRecord]:
    """Actions over three journals, as racing and retrying writers produce them."""
    seq_nrs: dict[JournalKey, int] = {}
    records: list[ActionRecord] = []
    for offset in range(draw(st.integers(0, 40))):
        key = draw(st.sampled_from(KEYS))
        last = seq_nrs.get(key, 0)
        kind = draw(st.sampled_from(["append", "append", "rival", "delete", "purge", "mark"]))
        if kind == "append":
            count = draw(st.integers(1, 4))
            records.append(a.append(key, offset, last + 1, last + count))
            seq_nrs[key] = last + count
        elif kind == "rival":  # a retry or a writer with another view of the journal
            first = draw(st.integers(1, last + 3))
            records.append(a.append(key, offset, first, first + draw(st.integers(0, 3))))
            if first == last + 1:
                seq_nrs[key] = records[-1].header.range.to  # type: ignore[union-attr]
        elif kind == "delete":
            records.append(a.delete(key, offset, draw(st.integers(1, last + 3))))
        elif kind == "purge":
            records.append(a.purge(key, offset))
            seq_nrs[key] = 0
        else:
            records.append(a.mark(key, offset))
    return records


def visible(journals: dict[JournalKey, ModelJournal]) -> dict[JournalKey, tuple[object, ...]]:
    """What a reader sees: (last seqNr, deleteTo, events), journals with nothing left out."""
    seen = {k: (j.seq_nr, j.delete_to, j.visible()) for k, j in journals.items()}
    return {k: v for k, v in seen.items() if v != (0, 0, [])}


async def replicate(store: MemoryStore, batches: Iterable[list[ActionRecord]]) -> None:
    """What the agents do with each batch: one Replicator, which keeps the rows it wrote."""
    replicator = Replicator(store, AlreadyQuarantined())
    for batch in batches:
        if batch:
            last = batch[-1]
            raw = RawRecord(last.key.topic, last.partition, last.offset, 0, None, None, [])
            await replicator.store(batch, raw)


async def store_view(store: MemoryStore) -> dict[JournalKey, ModelJournal]:
    found = {}
    for key in KEYS:
        meta = await store.meta(key)
        if meta is not None:
            events = {r.seq_nr: r.event async for r in store.read(key, meta)}
            found[key] = ModelJournal(meta.seq_nr or 0, meta.delete_to or 0, events)
    return found


def split(records: list[ActionRecord], cuts: list[int]) -> list[list[ActionRecord]]:
    bounds = sorted({0, len(records), *(c % (len(records) + 1) for c in cuts)})
    return [records[i:j] for i, j in itertools.pairwise(bounds)]


async def records_of(records: Iterable[ActionRecord]) -> AsyncIterator[ActionRecord]:
    for record in records:
        yield record


def merged(store: ModelJournal | None, head: JournalHead) -> ModelJournal:
    """A read's answer: the store's events unless purged, then the head's (journals.py)."""
    events = {} if store is None or head.purged else dict(store.events)
    events.update({r.seq_nr: r.event for r in head.events})
    return ModelJournal(head.state.seq_nr, head.state.delete_to, events)


@settings(max_examples=300, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6))
def test_replication_in_any_batching_equals_the_model(
    records: list[ActionRecord], cuts: list[int]
) -> None:
    async def go() -> dict[JournalKey, ModelJournal]:
        store = MemoryStore()
        await replicate(store, split(records, cuts))
        return await store_view(store)

    assert visible(asyncio.run(go())) == visible(run_model(records))


@settings(max_examples=300, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6), st.data())
def test_replaying_a_batch_changes_nothing(
    records: list[ActionRecord], cuts: list[int], data: st.DataObject
) -> None:
    batches = split(records, cuts)
    if batches:
        batches.append(data.draw(st.sampled_from(batches)))

    async def go() -> dict[JournalKey, ModelJournal]:
        store = MemoryStore()
        await replicate(store, batches)
        return await store_view(store)

    assert visible(asyncio.run(go())) == visible(run_model(records))


@settings(max_examples=300, deadline=None)
@given(workloads(), st.integers(0, 100))
def test_a_read_is_the_same_whatever_was_replicated(records: list[ActionRecord], cut: int) -> None:
    """Invariant 8: fold the unreplicated rest onto the store's state, for any prefix."""
    cut %= len(records) + 1

    async def go() -> dict[JournalKey, ModelJournal]:
        store = MemoryStore()
        await replicate(store, [records[:cut]])
        stored = await store_view(store)
        read = {}
        for key in KEYS:
            meta = await store.meta(key)
            base = JournalState() if meta is None else meta.state
            rest = [r for r in records[cut:] if r.key == key]
            head = await fold_head(base, records_of(rest), budget_bytes=2**20)
            read[key] = merged(stored.get(key), head)
        return read

    assert visible(asyncio.run(go())) == visible(run_model(records))


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_kafka_alone_from_offset_zero_equals_the_model(records: list[ActionRecord]) -> None:
    async def go() -> dict[JournalKey, ModelJournal]:
        read = {}
        for key in KEYS:
            mine = [r for r in records if r.key == key]
            head = await fold_head(JournalState(), records_of(mine), budget_bytes=2**20)
            read[key] = merged(None, head)
        return read

    assert visible(asyncio.run(go())) == visible(run_model(records))


@settings(max_examples=200, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6))
def test_the_stored_rows_do_not_depend_on_batching(
    records: list[ActionRecord], cuts: list[int]
) -> None:
    """So the agents and a Spark rebuild, batching differently, store the same rows."""

    async def metas(batches: list[list[ActionRecord]]) -> list[object]:
        store = MemoryStore()
        await replicate(store, batches)
        return [await store.meta(key) for key in KEYS]

    assert asyncio.run(metas(split(records, cuts))) == asyncio.run(metas([records]))


@settings(max_examples=300, deadline=None)
@given(workloads(), st.integers(0, 100), st.integers(0, 100))
def test_a_delete_s_answer_is_honoured_by_every_later_read(
    records: list[ActionRecord], cut: int, later: int
) -> None:
    """Issue 46: a Delete's answer is the fold's deleteTo at the Delete's record, whatever was
    replicated when it was taken (`ConditionalAppends.delete` folds the rest onto the store's
    state up to the Delete). It covers every Append accepted before the Delete, up to `to`, no
    more; and every read after it, from any replicated prefix, returns no event at or below it
    (until a Purge starts the journal again). The workloads' offsets are their indices."""
    deletes = [i for i, r in enumerate(records) if isinstance(r.header, DeleteHeader)]
    if not deletes:
        return
    at = deletes[cut % len(deletes)]
    delete = records[at]
    assert isinstance(delete.header, DeleteHeader)
    key, to = delete.key, delete.header.to
    mine = [r for r in records if r.key == key]

    async def fold_from(prefix: int, upto: int) -> tuple[ModelJournal | None, JournalHead]:
        """A read as of `records[upto]` with `records[:prefix]` replicated."""
        store = MemoryStore()
        await replicate(store, [records[:prefix]])
        meta = await store.meta(key)
        base = JournalState() if meta is None else meta.state
        rest = [r for r in records[prefix : upto + 1] if r.key == key]
        head = await fold_head(base, records_of(rest), budget_bytes=2**20)
        return (await store_view(store)).get(key), head

    async def go() -> None:
        _, head = await fold_from(cut % (at + 1), at)
        answer = head.state.delete_to
        before = run_model(records[:at]).get(key, ModelJournal())
        assert answer == max(before.delete_to, min(to, before.seq_nr))
        upto = at + later % (len(records) - at)
        if any(isinstance(r.header, PurgeHeader) for r in mine if at < r.offset <= upto):
            return  # the journal started again
        stored, read = await fold_from(later % (upto + 1), upto)
        shown = merged(stored, read)
        assert all(event.seq_nr > answer for event in shown.visible())
        assert shown.delete_to >= answer

    assert mine
    asyncio.run(go())


def listed_appends(journals: dict[JournalKey, ModelJournal]) -> list[tuple[JournalKey, int]]:
    """The `appends` rows once replicated: every accepted Append since its journal's last
    Purge with an event above the deleteTo (one wholly deleted or purged is listed nowhere)."""
    listed = [
        (offset, key)
        for key, journal in journals.items()
        for offset, last in journal.appends
        if last > journal.delete_to
    ]
    return [(key, offset) for offset, key in sorted(listed)]


async def store_appends(store: MemoryStore) -> list[tuple[JournalKey, int]]:
    return [(s.key, s.offset) async for s in store.appends(A.topic, 0, -1, 10**6)]


@settings(max_examples=300, deadline=None)
@given(workloads(), st.lists(st.integers(0, 100), max_size=6), st.data())
def test_the_appends_rows_are_those_of_surviving_appends_in_any_batching(
    records: list[ActionRecord], cuts: list[int], data: st.DataObject
) -> None:
    """The `appends` bound (docs/operations.md): a Delete or Purge removes the rows of the
    Appends whose events it removes, whether they were stored in an earlier batch or not,
    and a replayed batch brings none back."""
    batches = split(records, cuts)
    if batches:
        batches.append(data.draw(st.sampled_from(batches)))

    async def go() -> list[tuple[JournalKey, int]]:
        store = MemoryStore()
        await replicate(store, batches)
        return await store_appends(store)

    assert asyncio.run(go()) == listed_appends(run_model(records))


def test_a_write_s_removal_names_the_stored_events_it_removes() -> None:
    stored = {A: JournalState(4, 9, 2)}  # seqNrs 3..9 stored
    (write,) = fold_batch([a.delete(A, 5, 6)], stored)
    assert write.removal == Removal(3, 7, True, 5)  # 7's Append keeps 7.. if it holds 6
    (write,) = fold_batch([a.delete(A, 5, 9)], stored)
    assert write.removal == Removal(3, 9, False, 5)
    (write,) = fold_batch([a.delete(A, 5, 99), a.append(A, 6, 10, 12)], stored)
    assert write.removal == Removal(3, 9, False, 5)  # the batch's own Append is not stored
    (write,) = fold_batch([a.delete(A, 5, 4), a.purge(A, 6), a.append(A, 7, 1, 2)], stored)
    assert write.removal == Removal(3, 9, False, 6)  # the Purge: all, at its offset
    (write,) = fold_batch([a.append(A, 5, 10, 10)], stored)
    assert write.removal is None
    (write,) = fold_batch([a.delete(A, 5, 9), a.purge(A, 6)], {A: JournalState(4, 9, 9)})
    assert write.removal is None  # all deleted already: their rows went then


def test_the_conflict_rule() -> None:
    state = JournalState()
    state, verdict = state.apply(a.append(A, 0, 2, 3).header, 0)
    assert (state, verdict) == (JournalState(), Verdict.CONFLICT)  # a new journal starts at 1
    state, verdict = state.apply(a.append(A, 1, 1, 3).header, 1)
    assert (state, verdict) == (JournalState(1, 3, 0), Verdict.APPENDED)
    assert state.apply(a.append(A, 2, 1, 3).header, 2) == (state, Verdict.DUPLICATE)
    assert state.apply(a.append(A, 2, 2, 3).header, 2) == (state, Verdict.DUPLICATE)
    assert state.apply(a.append(A, 2, 1, 2).header, 2) == (state, Verdict.CONFLICT)
    assert state.apply(a.append(A, 2, 5, 5).header, 2) == (state, Verdict.CONFLICT)
    assert state.apply(a.append(A, 1, 4, 4).header, 1) == (state, Verdict.NOTHING)  # folded


def test_a_delete_covers_what_was_appended_before_it_only() -> None:
    state = JournalState(4, 3, 0)
    state, verdict = state.apply(a.delete(A, 5, 10).header, 5)
    assert (state, verdict) == (JournalState(5, 3, 3), Verdict.DELETED)
    assert state.apply(a.delete(A, 6, 2).header, 6) == (state, Verdict.NOTHING)
    state, _ = state.apply(a.append(A, 7, 4, 5).header, 7)
    assert state == JournalState(7, 5, 3)  # 4 and 5 stay visible


def test_a_purge_starts_the_journal_again_and_marks_change_nothing() -> None:
    state = JournalState(4, 3, 2)
    assert state.apply(a.mark(A, 5).header, 5) == (state, Verdict.NOTHING)
    assert state.apply(a.purge(A, 6).header, 6) == (JournalState(6), Verdict.PURGED)


def test_a_batch_write_keeps_what_survives_its_deletes_and_purge() -> None:
    records = [a.append(A, 0, 1, 2), a.append(A, 1, 3, 5), a.delete(A, 2, 2), a.delete(A, 3, 4)]
    (write,) = fold_batch(records, {})
    assert [r.offset for r in write.appends] == [1]  # 1..2 is wholly deleted, 3..5 is not
    assert write.delete is not None and (write.delete.to, write.delete.offset) == (4, 3)
    records = [a.append(A, 0, 1, 3), a.purge(A, 1), a.append(A, 2, 1, 1), a.append(A, 3, 1, 1)]
    (write,) = fold_batch(records, {A: JournalState(-1, 0, 0)})
    assert write.purge == 1 and [r.offset for r in write.appends] == [2]
    assert write.after == JournalState(2, 1, 0)


def test_marks_alone_change_no_journal() -> None:
    (write,) = fold_batch([a.mark(A, 5), a.mark(A, 6)], {})
    assert not write.changes_store


async def test_past_the_log_start_only_a_purge_proves_a_whole_journal() -> None:
    purged = await fold_whole(
        records_of([a.mark(A, 0), a.purge(A, 1), a.append(A, 2, 1, 1)]), 2**20
    )
    assert purged is not None and purged.state == JournalState(2, 1, 0)
    # a rival's Append from 1 proves nothing: the real history may have expired
    assert await fold_whole(records_of([a.append(A, 0, 1, 2)]), 2**20) is None
    assert await fold_whole(records_of([a.delete(A, 0, 3), a.append(A, 1, 4, 4)]), 2**20) is None
    assert await fold_whole(records_of([]), 2**20) is None


async def test_past_its_budget_a_head_keeps_only_offsets_and_a_purge_resets_it() -> None:
    records = [a.append(A, 0, 1, 2), a.append(A, 1, 3, 3)]
    head = await fold_head(JournalState(), records_of(records), budget_bytes=1)
    assert head.events == () and head.spilled == (0, 1) and head.state.seq_nr == 3
    head = await fold_head(
        JournalState(), records_of([*records, a.purge(A, 2), a.append(A, 3, 1, 1)]), 2**20
    )
    assert head.purged and head.spilled == () and [e.seq_nr for e in head.events] == [1]


def sealed_append(offset: int, first: int, last: int, sealer: Sealer) -> ActionRecord:
    """An encrypted Append of A as its writer produces it: sealed once, encoded."""
    events = [Event(n, payload=TextPayload(f"e{n}")) for n in range(first, last + 1)]
    payload_type, value = encode_events(Events(sealer.events(events)))
    return a.record(A, offset, AppendHeader(SeqRange(first, last), payload_type), value)


async def test_a_head_opens_its_events_as_it_decodes_them_and_refuses_only_what_it_holds() -> None:
    """With a read's opener the head's events are opened as they are decoded; with a key that
    does not open them the fold is the same and the refusal is kept for where the events would
    be handed out (`JournalHead.refused`): not once a Purge voids them, nor for an Append past
    the budget (refused when fetched again); a malformed Append is skipped, key or not."""
    raw = new_data_key()
    key_id = data_key_id(raw)
    sealer = Sealer(AESGCM(raw), A.id, key_id=key_id)
    opener = Opener(AESGCM(raw), A.id, key_id=key_id)
    wrong = Opener(AESGCM(new_data_key()), A.id, key_id=key_id)
    records = [sealed_append(0, 1, 2, sealer), sealed_append(1, 3, 3, sealer)]
    head = await fold_head(JournalState(), records_of(records), 2**20, opener)
    assert [r.event.payload for r in head.events] == [TextPayload(f"e{n}") for n in (1, 2, 3)]
    assert head.refused is None
    refused = await fold_head(JournalState(), records_of(records), 2**20, wrong)
    assert refused.state == head.state and refused.events == ()
    assert isinstance(refused.refused, EnvelopeRefused)
    purged = await fold_head(JournalState(), records_of([*records, a.purge(A, 2)]), 2**20, wrong)
    assert purged.purged and purged.refused is None
    spilled = await fold_head(JournalState(), records_of(records), 1, wrong)
    assert spilled.spilled == (0, 1) and spilled.refused is None
    broken = msgspec.structs.replace(records[1], value=records[1].value[:-3])
    for reader in (opener, wrong, None):
        skipped = await fold_head(JournalState(), records_of([records[0], broken]), 2**20, reader)
        assert skipped.state.seq_nr == 2


# --- a grow's cut (docs/growing.md): every action after the partition's first Seal is MOVED


def seal(offset: int) -> ActionRecord:
    return a.record(JournalKey("t", SEAL_ID), offset, MarkHeader(SEAL_ID))


def test_an_action_after_the_cut_is_moved_and_changes_nothing() -> None:
    state = JournalState(3, 2, 0)
    append = a.append(A, 9, 3, 3)
    assert state.apply(append.header, 9, cut=8) == (state, Verdict.MOVED)
    assert state.apply(a.purge(A, 9).header, 9, cut=8) == (state, Verdict.MOVED)
    assert state.apply(append.header, 7, cut=8) == (JournalState(7, 3, 0), Verdict.APPENDED)
    assert state.apply(append.header, 9) == (JournalState(9, 3, 0), Verdict.APPENDED)


def with_seals(records: list[ActionRecord], at: int, seals: int) -> list[ActionRecord]:
    """`records` with `seals` Seals from position `at` on (a resumed command's second one),
    renumbered: offsets stay consecutive."""
    at = at % (len(records) + 1)
    mixed = [*records[:at], *(seal(0) for _ in range(seals)), *records[at:]]
    return [
        a.record(r.key, offset, r.header, r.value) if r.key.id != SEAL_ID else seal(offset)
        for offset, r in enumerate(mixed)
    ]


@pytest.mark.parametrize("registry", [True, False], ids=["registry", "no registry"])
@settings(max_examples=300, deadline=None)
@given(
    workloads(),
    st.integers(0, 100),
    st.integers(1, 2),
    st.lists(st.integers(0, 100), max_size=6),
)
def test_replication_stops_at_the_first_seal_in_any_batching(
    registry: bool, records: list[ActionRecord], at: int, seals: int, cuts: list[int]
) -> None:
    """What replication stores equals the model of the records before the first Seal, however
    the log is cut into batches: a batch after the Seal's knows the cut from the registry, or,
    with none (a Spark share), from the Seal the replicator met in an earlier batch."""
    sealed = with_seals(records, at, seals)
    before = list(itertools.takewhile(lambda r: r.key.id != SEAL_ID, sealed))

    async def go() -> tuple[dict[JournalKey, ModelJournal], int | None]:
        store = MemoryStore()
        await store.record_plan("t", "t.6", 6)
        replicator = Replicator(store, AlreadyQuarantined(), cuts=store if registry else None)
        for batch in split(sealed, cuts):
            if batch:
                last = batch[-1]
                raw = RawRecord("t", 0, last.offset, 0, None, None, [])
                await replicator.store(batch, raw)
        grow = await store.grow("t")
        assert grow is not None
        return await store_view(store), grow.cut.get(0)

    stored, cut = asyncio.run(go())
    assert visible(stored) == visible(run_model(before))
    if registry:
        assert cut == len(before)  # the first Seal's offset, recorded by replication


def test_the_head_folds_nothing_of_a_journal_past_the_cut_when_told() -> None:
    """A read takes its fence at the cut (journal/client): the fold of the records below it is
    the journal's base, whatever follows the Seal."""
    records = [a.append(A, 0, 1, 2), seal(1), a.append(A, 2, 3, 3), a.purge(A, 3)]
    writes = fold_batch([r for r in records if r.key.id != SEAL_ID], {}, cut=1)
    assert [w.after for w in writes] == [JournalState(0, 2, 0)]
    assert [w.after for w in fold_batch(records, {})] == [JournalState(0, 2, 0)]


def test_what_a_delete_or_purge_in_the_grown_topic_removes_in_an_older_one() -> None:
    """`removed_in_older`: a moved journal's Delete in the grown topic removes its events in
    an older topic up to the Delete's deleteTo (no further than they go there), its Purge all
    of them, both as at that topic's cut (stamped cut + 1); nothing when nothing is left."""
    old, new = JournalKey("t", "j"), JournalKey("t.2", "j")
    row = JournalState(5, 3, 1)  # events 2..3 left in the older topic
    moved = JournalState(-1, 3, 1)

    def write_of(records: list[ActionRecord]) -> JournalWrite:
        (write,) = fold_batch(records, {new: moved})
        return write

    deleted = write_of([a.append(new, 0, 4, 4), a.delete(new, 1, 2)])
    removal = removed_in_older(deleted, old, row, 0, 9)
    assert removal == JournalWrite(old, 0, row, JournalState(9, 3, 2), delete=DeleteTo(2, 9))
    beyond = removed_in_older(write_of([a.delete(new, 0, 10)]), old, row, 0, 9)
    assert beyond is not None and beyond.delete == DeleteTo(3, 9)  # no further than 3
    assert removed_in_older(write_of([a.delete(new, 0, 1)]), old, row, 0, 9) is None
    purged = removed_in_older(write_of([a.purge(new, 0)]), old, row, 0, 9)
    assert purged == JournalWrite(old, 0, row, JournalState(9), purge=9)
    assert purged.removal is not None and purged.removal.offset == 9
    assert removed_in_older(write_of([a.append(new, 0, 4, 4)]), old, row, 0, 9) is None
    assert removed_in_older(purged, old, JournalState(5, 3, 3), 0, 9) is None  # none left
