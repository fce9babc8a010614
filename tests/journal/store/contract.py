"""The contract every eventual store passes (run by test_memory.py and test_cassandra.py).

A subclass provides the `store` fixture: a fresh, empty store whose segments (if it has any)
hold 5 events, so that small journals already span several, whose snapshot payloads may have
`SNAPSHOT_LIMIT` bytes and (if it chunks them) are written in chunks of `SNAPSHOT_CHUNK`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from msgspec.structs import replace as struct_replace

from journal.codec import encode_events
from journal.codec.actions import events_of
from journal.core.fold import fold_batch
from journal.core.model import (
    SEQ_NR_MAX,
    ActionRecord,
    AppendHeader,
    BinaryPayload,
    Event,
    EventRecord,
    Events,
    JournalKey,
    JsonPayload,
    Payload,
    PayloadMetadata,
    SeqRange,
    TextPayload,
)
from journal.errors import SnapshotTooLarge
from journal.store.base import EventualStore, Snapshot, states
from tests.support import actions as a

SEGMENT = 5
SNAPSHOT_CHUNK = 4
SNAPSHOT_LIMIT = 40
# the store keeps milliseconds, as Cassandra's timestamps do
WHEN = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
KEY = JournalKey("topic", "journal-1")
OTHER = JournalKey("topic", "journal-2")


async def read_all(
    store: EventualStore, key: JournalKey, from_: int = 1, to: int = 2**63 - 1
) -> list[EventRecord]:
    meta = await store.meta(key)
    assert meta is not None
    return [r async for r in store.read(key, meta, from_, to)]


async def apply(store: EventualStore, *records: ActionRecord) -> None:
    """What replication does with a batch: fold it onto the stored states, apply."""
    stored = await store.stored({r.key for r in records})
    await store.apply(fold_batch(records, states(stored)), stored)


async def listed(store: EventualStore, partition: int = 0) -> list[tuple[JournalKey, int]]:
    """The `appends` rows of the topic's `partition`: (journal, offset)."""
    return [(s.key, s.offset) async for s in store.appends("topic", partition, -1, 10**6)]


def expected(*records: ActionRecord) -> list[EventRecord]:
    return [e for r in records for e in events_of(r)]


def snapshot(seq_nr: int, mark: int, payload: Payload | None = None) -> Snapshot:
    return Snapshot(seq_nr, payload or JsonPayload.of({"at": seq_nr, "mark": mark}), WHEN, mark)


async def latest(
    store: EventualStore, max_seq_nr: int = SEQ_NR_MAX, after: int = -1, before: int = 2**62
) -> Snapshot | None:
    return await store.latest_snapshot(KEY, max_seq_nr, after, before)


async def put(store: EventualStore, *snapshots: Snapshot) -> None:
    for each in snapshots:
        await store.put_snapshot(KEY, each)


class EventualStoreContract:
    async def test_an_unknown_journal_has_no_meta(self, store: EventualStore) -> None:
        assert await store.meta(KEY) is None

    async def test_appended_events_read_back_equal_and_in_order(self, store: EventualStore) -> None:
        first, second = a.append(KEY, 0, 1, 3), a.append(KEY, 1, 4, 12)
        await apply(store, first, second)
        assert await read_all(store, KEY) == expected(first, second)
        meta = await store.meta(KEY)
        assert meta is not None and (meta.seq_nr, meta.delete_to, meta.offset) == (12, None, 1)

    async def test_metadata_and_headers_survive(self, store: EventualStore) -> None:
        record = struct_replace(a.append(KEY, 0, 1, 2), headers={"h": "v"})
        await apply(store, record)
        (first, _) = await read_all(store, KEY)
        assert first.headers == {"h": "v"}
        assert first.metadata == PayloadMetadata()

    async def test_tags_of_every_kind_read_back_equal(self, store: EventualStore) -> None:
        # the Cassandra store reads tags as JSON text, decoded once per distinct text a page
        kinds = [
            frozenset(),
            frozenset({""}),
            frozenset({'quote " and \\ backslash', "null", "[]"}),
            frozenset({"ünïcødé ✓", "tab\tnew\nline\u0001"}),
            frozenset({"a", "b", "c"}),
            frozenset({"a", "b", "c"}),
            frozenset(),
        ]
        events = Events(
            tuple(Event(n, tags, JsonPayload.of(n)) for n, tags in enumerate(kinds, start=1))
        )
        payload_type, value = encode_events(events)
        header = AppendHeader(SeqRange(1, len(kinds)), payload_type)
        await apply(store, a.record(KEY, 0, header, value))
        assert [r.event.tags for r in await read_all(store, KEY)] == kinds
        stored = await store.first_page(KEY, 1, len(kinds))
        assert [r.event.tags for r in stored.events] == kinds[: len(stored.events)]

    async def test_reads_a_range_across_segments(self, store: EventualStore) -> None:
        await apply(store, a.append(KEY, 0, 1, 23))
        got = [r.seq_nr for r in await read_all(store, KEY, 4, 17)]
        assert got == list(range(4, 18))

    async def test_journals_do_not_mix(self, store: EventualStore) -> None:
        await apply(store, a.append(KEY, 0, 1, 2), a.append(OTHER, 1, 1, 3))
        assert [r.seq_nr for r in await read_all(store, KEY)] == [1, 2]
        assert [r.seq_nr for r in await read_all(store, OTHER)] == [1, 2, 3]

    async def test_delete_hides_and_removes_events_up_to_it(self, store: EventualStore) -> None:
        await apply(store, a.append(KEY, 0, 1, 4), a.append(KEY, 1, 5, 11))
        await apply(store, a.append(KEY, 2, 12, 13), a.delete(KEY, 3, 11))
        meta = await store.meta(KEY)
        assert meta is not None and meta.delete_to == 11 and meta.seq_nr == 13
        assert [r.seq_nr for r in await read_all(store, KEY)] == [12, 13]
        # the Appends wholly at or below deleteTo are gone too, not only hidden: a reader with
        # an older deleteTo sees none of them
        assert [r.seq_nr async for r in store.read(KEY, replace(meta, delete_to=None))] == [12, 13]

    async def test_a_delete_inside_an_append_keeps_the_events_above_it(
        self, store: EventualStore
    ) -> None:
        """One Append 1..13 across segments (of 5), deleted to 11 and then 12: every read, from
        any seqNr, and the Append as a subscription reads it, has only the events above."""
        append = a.append(KEY, 0, 1, 13)
        await apply(store, append, a.delete(KEY, 1, 11))
        for from_ in (1, 5, 11, 12, 13):
            assert [r.seq_nr for r in await read_all(store, KEY, from_)] == [
                s for s in (12, 13) if s >= from_
            ]
        assert [r.seq_nr for r in await read_all(store, KEY, 1, 12)] == [12]
        assert await read_all(store, KEY) == expected(append)[11:]
        (stored,) = [s async for s in store.appends("topic", 0, -1, 10)]
        assert [r.seq_nr async for r in store.append_events(stored)] == [12, 13]
        await apply(store, a.delete(KEY, 2, 12), a.append(KEY, 3, 14, 15))
        assert [r.seq_nr for r in await read_all(store, KEY, 12)] == [13, 14, 15]
        assert [r.seq_nr async for r in store.append_events(stored)] == [13]

    async def test_a_smaller_delete_never_moves_delete_to_back(self, store: EventualStore) -> None:
        await apply(store, a.append(KEY, 0, 1, 9), a.delete(KEY, 1, 7))
        await apply(store, a.delete(KEY, 2, 3))
        meta = await store.meta(KEY)
        assert meta is not None and meta.delete_to == 7

    async def test_purge_empties_and_a_new_journal_may_start_at_one(
        self, store: EventualStore
    ) -> None:
        await apply(store, a.append(KEY, 0, 1, 12), a.delete(KEY, 1, 3))
        await apply(store, a.purge(KEY, 2))
        meta = await store.meta(KEY)
        assert meta is not None and (meta.seq_nr, meta.delete_to) == (None, None)
        assert await read_all(store, KEY) == []
        again = a.append(KEY, 3, 1, 2)
        await apply(store, again)
        assert await read_all(store, KEY) == expected(again)

    async def test_applying_a_batch_twice_changes_nothing(self, store: EventualStore) -> None:
        batch = [a.append(KEY, 0, 1, 6), a.delete(KEY, 1, 2), a.append(KEY, 2, 7, 8)]
        await apply(store, *batch)
        before = (await store.meta(KEY), await read_all(store, KEY))
        await apply(store, *batch)
        assert (await store.meta(KEY), await read_all(store, KEY)) == before

    async def test_an_old_batch_after_a_purge_resurrects_nothing(
        self, store: EventualStore
    ) -> None:
        old = [a.append(KEY, 0, 1, 6)]
        await apply(store, *old)
        await apply(store, a.purge(KEY, 1))
        await apply(store, *old)
        meta = await store.meta(KEY)
        assert meta is not None and meta.seq_nr is None
        assert await read_all(store, KEY) == []

    async def test_the_pointer_only_moves_forward(self, store: EventualStore) -> None:
        assert await store.pointer("topic", 0) is None
        await store.save_pointer("topic", 0, 10)
        await store.save_pointer("topic", 0, 4)
        await store.save_pointer("topic", 1, 7)
        await store.save_pointer("other", 0, 99)
        assert await store.pointer("topic", 0) == 10
        assert await store.pointers("topic") == {0: 10, 1: 7}

    async def test_the_first_page_holds_every_stored_event_it_says_it_covers(
        self, store: EventualStore
    ) -> None:
        # Appends of at most a segment (5): a store of a row per Append finds the one holding
        # `from_` in its segment or the next
        appends = [a.append(KEY, i, 5 * i + 1, 5 * i + 5) for i in range(4)]
        await apply(store, *appends, a.append(KEY, 4, 21, 23), a.delete(KEY, 5, 2))
        meta = await store.meta(KEY)
        assert meta is not None
        page = await store.first_page(KEY, 2, 20)
        assert page.fits(meta)
        stored = [r async for r in store.read(KEY, meta, 2, 20)]
        kept = [r for r in page.events if r.seq_nr > 2]  # 2 is deleted: a reader drops it
        assert kept and kept == stored[: len(kept)]  # a prefix: one round trip saved
        assert (await store.first_page(OTHER, 1, 5)).events == ()

    async def test_marks_alone_change_no_journal(self, store: EventualStore) -> None:
        await apply(store, a.mark(KEY, 0))
        assert await store.meta(KEY) is None

    async def test_appends_lists_the_stored_appends_of_a_partition_in_offset_order(
        self, store: EventualStore
    ) -> None:
        await apply(store, a.append(KEY, 0, 1, 3), a.append(KEY, 1, 2, 4), a.append(OTHER, 2, 1, 7))
        await apply(store, a.append(KEY, 3, 4, 4), a.mark(KEY, 4), a.append(KEY, 5, 4, 4))
        stored = store.appends("topic", 0, -1, 9)
        listed = [(s.key, s.offset, s.first, s.last) async for s in stored]
        # the conflicting Append at 1 and the duplicate at 5 were rejected: not stored
        assert listed == [(KEY, 0, 1, 3), (OTHER, 2, 1, 7), (KEY, 3, 4, 4)]
        window = [s.offset async for s in store.appends("topic", 0, 0, 2)]
        assert window == [2]  # (after, to]
        assert [s async for s in store.appends("topic", 1, -1, 9)] == []

    async def test_appends_lists_across_its_slices_and_buckets(self, store: EventualStore) -> None:
        """A store may read `appends` a slice of offsets at a time (Cassandra's: 1,000 a query,
        in buckets of 100,000): the listing is the same."""
        offsets = [5, 1_500, 99_999, 100_000, 250_000]
        await apply(store, *(a.append(KEY, o, n, n) for n, o in enumerate(offsets, 1)))
        assert await listed(store) == [(KEY, o) for o in offsets]
        window = store.appends("topic", 0, 1_499, 100_000)
        assert [s.offset async for s in window] == [1_500, 99_999, 100_000]

    async def test_append_events_are_the_ones_still_stored(self, store: EventualStore) -> None:
        first = a.append(KEY, 0, 1, 12)
        await apply(store, first)
        await apply(store, a.delete(KEY, 1, 10))
        (stored,) = [s async for s in store.appends("topic", 0, -1, 0)]
        got = [r.seq_nr async for r in store.append_events(stored)]
        assert got == [11, 12]
        await apply(store, a.purge(KEY, 2), a.append(KEY, 3, 1, 12))  # the same seqNrs again
        assert [r async for r in store.append_events(stored)] == []
        (again,) = [s async for s in store.appends("topic", 0, -1, 3)]  # the Purge removed 0's
        assert [r.offset async for r in store.append_events(again)] == [3] * 12

    async def test_a_delete_removes_the_appends_rows_of_the_appends_it_removes_wholly(
        self, store: EventualStore
    ) -> None:
        await apply(
            store,
            a.append(KEY, 0, 1, 3),
            a.append(OTHER, 1, 1, 2),
            a.append(KEY, 2, 4, 6),
            a.append(KEY, 3, 7, 9),
        )
        await apply(store, a.delete(KEY, 4, 5))  # 1..3 wholly, 4..6 in part
        assert await listed(store) == [(OTHER, 1), (KEY, 2), (KEY, 3)]
        await apply(store, a.delete(KEY, 5, 6))  # the rest of 4..6, across segments
        assert await listed(store) == [(OTHER, 1), (KEY, 3)]
        await apply(store, a.delete(KEY, 6, 99), a.append(KEY, 7, 10, 10))
        assert await listed(store) == [(OTHER, 1), (KEY, 7)]  # the later Append stays

    async def test_a_purge_removes_the_appends_rows_of_the_journal_and_a_replay_none_more(
        self, store: EventualStore
    ) -> None:
        first = [a.append(KEY, 0, 1, 7), a.append(OTHER, 1, 1, 1), a.append(KEY, 2, 8, 8)]
        second = [a.delete(KEY, 3, 2), a.purge(KEY, 4), a.append(KEY, 5, 1, 2)]
        await apply(store, *first)
        await apply(store, *second)
        assert await listed(store) == [(OTHER, 1), (KEY, 5)]
        await apply(store, *first)
        await apply(store, *second)
        assert await listed(store) == [(OTHER, 1), (KEY, 5)]
        assert [e.seq_nr for e in await read_all(store, KEY)] == [1, 2]

    # Snapshots.

    @pytest.mark.parametrize(
        "payload",
        [
            JsonPayload.of({"state": [1, "two", None]}),
            TextPayload("état"),
            BinaryPayload(bytes(range(SNAPSHOT_LIMIT))),  # the limit, in several chunks
            BinaryPayload(b""),
        ],
        ids=["json", "text", "binary_at_the_limit", "empty"],
    )
    async def test_a_snapshot_reads_back_equal(
        self, store: EventualStore, payload: Payload
    ) -> None:
        await put(store, snapshot(3, 10, payload))
        assert await latest(store) == snapshot(3, 10, payload)
        assert await store.latest_snapshot(OTHER, SEQ_NR_MAX, -1, 2**62) is None

    async def test_one_byte_over_the_limit_is_refused(self, store: EventualStore) -> None:
        assert store.max_snapshot_bytes == SNAPSHOT_LIMIT
        with pytest.raises(SnapshotTooLarge):
            await put(store, snapshot(3, 10, TextPayload("x" * (SNAPSHOT_LIMIT + 1))))
        assert await latest(store) is None

    async def test_latest_is_the_newest_at_or_below(self, store: EventualStore) -> None:
        await put(store, snapshot(6, 11), snapshot(3, 10), snapshot(9, 12))
        assert await latest(store) == snapshot(9, 12)
        assert await latest(store, 8) == snapshot(6, 11)
        assert await latest(store, 6) == snapshot(6, 11)
        assert await latest(store, 2) is None

    async def test_latest_answers_only_marks_between_its_bounds(self, store: EventualStore) -> None:
        await put(store, snapshot(3, 10), snapshot(6, 20), snapshot(9, 30))
        assert await latest(store, before=30) == snapshot(6, 20)  # 9 is later than the fence
        assert await latest(store, after=20) == snapshot(9, 30)
        assert await latest(store, 8, after=10) == snapshot(6, 20)
        assert await latest(store, 8, after=20) is None  # 3 and 6 precede a Purge at 20

    async def test_a_put_replaces_one_with_an_earlier_mark_only(self, store: EventualStore) -> None:
        await put(store, snapshot(5, 10, TextPayload("first")))
        await put(store, snapshot(5, 12, BinaryPayload(b"second")))
        await put(store, snapshot(5, 11, TextPayload("late, and older")))
        assert await latest(store) == snapshot(5, 12, BinaryPayload(b"second"))

    async def test_delete_removes_those_put_before_it_up_to_its_seq_nr(
        self, store: EventualStore
    ) -> None:
        await put(store, snapshot(3, 10), snapshot(6, 11), snapshot(9, 12))
        await store.delete_snapshots(KEY, 6, 13)
        assert await latest(store) == snapshot(9, 12)
        assert await latest(store, 8) is None
        await put(store, snapshot(3, 12))  # taken before the delete, written after: gone too
        assert await latest(store, 8) is None
        await put(store, snapshot(3, 14))  # after the delete
        assert await latest(store, 8) == snapshot(3, 14)

    async def test_a_purge_removes_the_snapshots_put_before_it(self, store: EventualStore) -> None:
        await apply(store, a.append(KEY, 0, 1, 9))
        await put(store, snapshot(3, 1), snapshot(6, 2))
        await store.put_snapshot(OTHER, snapshot(3, 1))
        await apply(store, a.purge(KEY, 3))
        assert await latest(store) is None
        await put(store, snapshot(6, 2))  # took its Mark before the Purge, written after it
        assert await latest(store) is None
        await apply(store, a.append(KEY, 4, 1, 3))  # the journal starts again at 1
        await put(store, snapshot(2, 5))
        assert await latest(store) == snapshot(2, 5)
        assert await store.latest_snapshot(OTHER, SEQ_NR_MAX, -1, 2**62) == snapshot(3, 1)

    async def test_replaying_a_purge_keeps_later_snapshots(self, store: EventualStore) -> None:
        purge = a.purge(KEY, 3)
        await apply(store, purge)
        await put(store, snapshot(1, 4))
        await store.apply(fold_batch([purge], {}), {})  # a rebuild from Kafka, say
        assert await latest(store) == snapshot(1, 4)

    async def test_journal_ids_page_by_prefix_in_order(self, store: EventualStore) -> None:
        ids = ["b", "a-2", "a-10", "a-1", "ab", "a", "a-\U0010ffff", "a-\U0010ffffx", "é"]
        await apply(store, *(a.append(JournalKey("topic", i), n, 1, 1) for n, i in enumerate(ids)))
        await apply(store, a.append(JournalKey("other", "a-3"), 20, 1, 1))
        assert await store.journal_ids("topic") == sorted(ids)
        in_a = sorted(i for i in ids if i.startswith("a-"))
        assert await store.journal_ids("topic", "a-") == in_a
        pages, after = [], None
        while page := await store.journal_ids("topic", "a-", after, 2):
            pages.append(page)
            after = page[-1]
        assert pages == [in_a[0:2], in_a[2:4], in_a[4:]]
        assert await store.journal_ids("topic", "a-", "a-1x") == ["a-2", *in_a[3:]]
        assert await store.journal_ids("topic", "a-", "0") == in_a  # below the prefix
        assert await store.journal_ids("topic", "a-", "b") == []
        assert await store.journal_ids("topic", "\U0010ffff") == []
        top = "a-\U0010ffff"
        assert await store.journal_ids("topic", top) == [top, top + "x"]

    async def test_journal_ids_follow_existence(self, store: EventualStore) -> None:
        rejected, deleted = JournalKey("topic", "rejected"), JournalKey("topic", "deleted")
        await apply(
            store,
            a.append(KEY, 0, 1, 2),
            a.append(rejected, 1, 2, 3),  # does not continue an empty journal: rejected
            a.append(deleted, 2, 1, 2),
            a.delete(deleted, 3, 2),  # no events left, yet it exists
            a.append(OTHER, 4, 1, 1),
            a.purge(OTHER, 5),  # appended and purged in one batch: never listed
        )
        assert await store.journal_ids("topic") == ["deleted", KEY.id]
        await apply(store, a.purge(KEY, 6))
        assert await store.journal_ids("topic") == ["deleted"]
        old = a.append(KEY, 0, 1, 2)
        await apply(store, old)  # replayed from before the Purge: still gone
        assert await store.journal_ids("topic") == ["deleted"]
        await apply(store, a.append(KEY, 7, 1, 1), a.append(OTHER, 8, 1, 1))
        assert await store.journal_ids("topic") == ["deleted", KEY.id, OTHER.id]
        await apply(store, a.purge(KEY, 9), a.append(KEY, 10, 1, 3))  # purged and restarted
        assert await store.journal_ids("topic") == ["deleted", KEY.id, OTHER.id]


@pytest.fixture
def segment_size() -> int:
    return SEGMENT
