"""Conditional appends and idempotent retries with the direct client: produce, then the log's
verdict (journal/client/conditional.py), against the real servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from journal.client.conditional import (
    IDEMPOTENCY_KEY_HEADER,
    Idempotency,
    JournalLocks,
    KnownState,
    KnownStates,
    check_idempotency_key,
    records_between,
)
from journal.client.journals import Journal, Journals
from journal.core.fold import JournalState
from journal.core.index import OffsetRun
from journal.core.model import (
    Ack,
    HeaderMetadata,
    JournalKey,
    JsonPayload,
    NewEvent,
    Position,
    SeqRange,
)
from journal.errors import IdempotencyKeyReused, InvalidValue, SeqNrConflict
from journal.metrics import METRICS
from stack import Stack
from tests.journal.journal_contract import events
from tests.support.harness import Harness, harness, unique


async def read_seq_nrs(journal: Journal) -> list[int]:
    return [r.seq_nr async for r in journal.read()]


async def try_append(journal: Journal, first: int, last: int) -> Position | SeqNrConflict:
    try:
        return await journal.append(events(first, last), expected_seq_nr=first - 1)
    except SeqNrConflict as conflict:
        return conflict


# --- without servers --------------------------------------------------------------------------


async def test_journal_locks_serialise_per_journal_and_forget_idle_journals() -> None:
    locks = JournalLocks()
    a, b = JournalKey("t", "a"), JournalKey("t", "b")
    inside: list[str] = []

    async def hold(key: JournalKey, name: str) -> None:
        async with locks.hold(key):
            inside.append(f"+{name}")
            await asyncio.sleep(0)  # give the others a chance to enter, if the lock allowed it
            inside.append(f"-{name}")

    await asyncio.gather(hold(a, "a1"), hold(a, "a2"), hold(b, "b1"))
    assert inside.index("-a1") < inside.index("+a2")  # a2 entered only after a1 left
    assert inside.index("+b1") < inside.index("-a1")  # another journal did not wait
    assert len(locks) == 0


async def test_a_lock_says_whether_anybody_holds_or_awaits_it() -> None:
    locks = JournalLocks()
    key = JournalKey("t", "a")
    assert key not in locks
    async with locks.hold(key):
        assert key in locks
    assert key not in locks


def test_a_remembered_state_is_never_replaced_by_an_older_one() -> None:
    # a look outside the lock may finish after a verdict inside it: it knows less
    known = KnownStates(capacity=2)
    key = JournalKey("t", "a")
    newer = KnownState(JournalState(offset=10, seq_nr=3), as_of=12)
    known.put(key, newer)
    known.put(key, KnownState(JournalState(offset=7, seq_nr=2), as_of=9))
    assert known.get(key) == newer
    newest = KnownState(JournalState(offset=13, seq_nr=4), as_of=13)
    known.put(key, newest)
    assert known.get(key) == newest


def test_an_idempotency_digest_covers_the_request() -> None:
    def digest(value: bytes, data: str | None, headers: dict[str, str]) -> str:
        return Idempotency.of_request("k", value, HeaderMetadata(data), headers).digest

    base = digest(b"v", None, {"h": "1"})
    assert digest(b"v", None, {"h": "1"}) == base
    assert len({base, digest(b"w", None, {"h": "1"}), digest(b"v", "m", {"h": "1"})}) == 3
    assert digest(b"v", None, {"h": "2"}) != base


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "é"])
def test_idempotency_keys_are_short_printable_ascii(key: str) -> None:
    with pytest.raises(InvalidValue):
        check_idempotency_key(key)


# --- against the servers ----------------------------------------------------------------------


@pytest.fixture
async def direct(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "cond") as connected:
        yield connected


@pytest.mark.integration
async def test_a_conditional_append_is_accepted_only_where_the_journal_is(
    direct: Harness,
) -> None:
    journal = direct.journals.journal(unique("j"))
    first = await journal.append(events(1, 2), expected_seq_nr=0)
    with pytest.raises(SeqNrConflict) as conflict:
        await journal.append(events(1, 1), expected_seq_nr=0)
    assert conflict.value.seq_nr == 2
    with pytest.raises(InvalidValue):  # the expectation contradicts the events' seqNrs
        await journal.append(events(3, 3), expected_seq_nr=1)
    await direct.replicate()
    third = await journal.append(events(3, 3), expected_seq_nr=2)
    assert (third.partition, third.offset > first.offset) == (first.partition, True)
    assert await read_seq_nrs(journal) == [1, 2, 3]


@pytest.mark.integration
async def test_two_clients_racing_on_one_journal_have_one_winner(
    direct: Harness,
) -> None:
    """Two processes' worth of writers, no lock shared: the log alone picks the winner."""
    rival = await Journals.connect(direct.settings)
    try:
        journal_id = unique("race")
        clients = [direct.journals.journal(journal_id), rival.journal(journal_id)]
        answers = await asyncio.gather(*(try_append(clients[n % 2], 1, 2) for n in range(10)))
    finally:
        await rival.close()
    won = [a for a in answers if isinstance(a, Position)]
    lost = [a for a in answers if isinstance(a, SeqNrConflict)]
    assert (len(won), len(lost)) == (1, 9)
    assert {c.seq_nr for c in lost} == {2}
    journal = direct.journals.journal(journal_id)
    winner_offsets = {r.offset async for r in journal.read()}
    assert winner_offsets == {won[0].offset}
    await direct.replicate()
    assert {r.offset async for r in journal.read()} == {won[0].offset}
    assert await read_seq_nrs(journal) == [1, 2]


@pytest.mark.integration
async def test_an_idempotent_retry_answers_the_first_append_and_adds_nothing(
    direct: Harness,
) -> None:
    journal = direct.journals.journal(unique("idem"))
    first = await journal.append(events(1, 2), expected_seq_nr=0, idempotency_key="k1")
    assert await journal.append(events(1, 2), expected_seq_nr=0, idempotency_key="k1") == first
    await direct.replicate()  # the key is found in the store as well as in Kafka
    assert await journal.append(events(1, 2), expected_seq_nr=0, idempotency_key="k1") == first
    # without an expectation too: the key alone makes the retry safe
    assert await journal.append(events(1, 2), idempotency_key="k1") == first
    with pytest.raises(IdempotencyKeyReused):
        await journal.append(events(1, 1), expected_seq_nr=0, idempotency_key="k1")
    with pytest.raises(SeqNrConflict):  # another key: a conflict like any other
        await journal.append(events(1, 2), expected_seq_nr=0, idempotency_key="k2")
    records = [r async for r in journal.read()]
    assert [r.seq_nr for r in records] == [1, 2]
    assert {r.headers[IDEMPOTENCY_KEY_HEADER] for r in records} == {"k1"}


def test_records_between_counts_a_journals_records_in_a_range_or_says_it_cannot() -> None:
    exact, spanning = OffsetRun(10, 12, 3), OffsetRun(20, 30, 2)  # the latter: others' too
    assert records_between([exact, spanning], 9, 12) == 3
    assert records_between([exact, spanning], 10, 11) == 1  # an exact run splits
    assert records_between([exact, spanning], 12, 19) == 0
    assert records_between([exact, spanning], 12, 30) == 2
    assert records_between([exact, spanning], 12, 25) is None  # which of the two lie below?


def verdict_paths() -> dict[str, float]:
    return {
        path: METRICS.value("kafka_journal_conditional_verdicts_total", path=path)
        for path in ("memory", "read")
    }


@pytest.mark.integration
async def test_a_writer_that_knows_the_journal_skips_reads_until_a_rival_writes(
    direct: Harness,
) -> None:
    journal_id = unique("known")
    journal = direct.journals.journal(journal_id)
    await journal.append(events(1, 1), expected_seq_nr=0)
    before = verdict_paths()
    await journal.append(events(2, 2), expected_seq_nr=1)
    assert verdict_paths() == {"memory": before["memory"] + 1, "read": before["read"]}
    rival = await Journals.connect(direct.settings)
    try:
        await rival.journal(journal_id).append(events(3, 3))  # this process does not know
    finally:
        await rival.close()
    with pytest.raises(SeqNrConflict) as conflict:  # produced on stale knowledge, then refused
        await journal.append(events(3, 4), expected_seq_nr=2)
    assert conflict.value.seq_nr == 3
    assert verdict_paths()["read"] == before["read"] + 1
    assert await read_seq_nrs(journal) == [1, 2, 3]
    await journal.append(events(4, 4), expected_seq_nr=3)
    assert await read_seq_nrs(journal) == [1, 2, 3, 4]


@pytest.mark.integration
async def test_a_plain_append_that_does_not_continue_the_journal_is_refused_and_never_seen(
    direct: Harness,
) -> None:
    """Verified by default: the log's verdict answers, and what it rejected no read shows,
    before replication or after."""
    journal = direct.journals.journal(unique("plain"))
    appended = await journal.append(events(1, 2))
    assert appended.seq_nrs == SeqRange(1, 2)
    with pytest.raises(SeqNrConflict) as conflict:
        await journal.append(events(4, 4))  # a gap
    assert conflict.value.seq_nr == 2
    with pytest.raises(SeqNrConflict):
        await journal.append(events(2, 3))  # over the journal's last event
    assert await read_seq_nrs(journal) == [1, 2]
    await direct.replicate()
    assert await read_seq_nrs(journal) == [1, 2]
    assert (await direct.stored(journal.key.id))[1] == [1, 2]
    # the old mode: acknowledged by Kafka, rejected by the fold, still never seen
    await journal.append(events(4, 4), ack=Ack.KAFKA)
    assert await read_seq_nrs(journal) == [1, 2]


@pytest.mark.integration
async def test_writers_appending_at_the_end_through_one_client_get_contiguous_ranges(
    direct: Harness,
) -> None:
    journal = direct.journals.journal(unique("at-end"))

    async def writer(n: int) -> list[tuple[SeqRange, int, list[NewEvent]]]:
        got = []
        for step in range(5):
            new = [NewEvent(payload=JsonPayload.of({"w": n, "s": step, "i": i})) for i in range(2)]
            appended = await journal.append_at_end(new)
            got.append((appended.seq_nrs, appended.offset, new))
        return got

    answers = [a for got in await asyncio.gather(*(writer(n) for n in range(8))) for a in got]
    records = [r async for r in journal.read()]
    assert [r.seq_nr for r in records] == list(range(1, 8 * 5 * 2 + 1))
    for seq_nrs, offset, sent in answers:  # each answer's range holds exactly its events
        held = [r.event for r in records if r.offset == offset]
        assert held == [e.numbered(seq_nrs.from_ + i) for i, e in enumerate(sent)]
        assert seq_nrs.to == seq_nrs.from_ + len(sent) - 1
    key = "retry-1"
    first = await journal.append_at_end([NewEvent()], idempotency_key=key)
    assert await journal.append_at_end([NewEvent()], idempotency_key=key) == first
    await direct.replicate()  # found in the store as well as in Kafka, by another client too
    other = await Journals.connect(direct.settings)
    try:
        again = await other.journal(journal.key.id).append_at_end([NewEvent()], idempotency_key=key)
    finally:
        await other.close()
    assert again == first
    assert await read_seq_nrs(journal) == list(range(1, 8 * 5 * 2 + 2))


@pytest.mark.integration
async def test_a_keyed_append_at_the_end_goes_on_a_journal_with_deleted_events(
    direct: Harness,
) -> None:
    """Issue 38 item 8: append 2, delete to 1, a new key: appended (it was refused, the search
    stopping at the deleted event as if it may have held the key)."""
    journal = direct.journals.journal(unique("deleted"))
    await journal.append_at_end([NewEvent(), NewEvent()])
    await journal.delete(1)
    first = await journal.append_at_end([NewEvent()], idempotency_key="after-delete")
    assert first.seq_nrs == SeqRange(3, 3)
    assert await journal.append_at_end([NewEvent()], idempotency_key="after-delete") == first
    await direct.replicate()  # the store's row says deleteTo: found there as well
    assert await journal.append_at_end([NewEvent()], idempotency_key="after-delete") == first
    assert await read_seq_nrs(journal) == [2, 3]


@pytest.mark.integration
async def test_the_direct_clients_appends_at_the_end_carry_a_fresh_key_by_default(
    direct: Harness,
) -> None:
    """Issue 38 item 6: by default an append at the end gets a key of its own (safe to repeat
    with it); `idempotency_key=None` appends without one."""
    journal = direct.journals.journal(unique("fresh-key"))
    await journal.append_at_end([NewEvent(), NewEvent()])
    await journal.append_at_end([NewEvent()])
    await journal.append_at_end([NewEvent()], idempotency_key=None)
    records = [r async for r in journal.read()]
    keys = [r.headers.get(IDEMPOTENCY_KEY_HEADER) for r in records]
    assert keys[0] == keys[1] and keys[0] is not None  # one key per append, not per event
    assert keys[2] is not None and keys[2] != keys[0]
    assert keys[3] is None
    assert [r.seq_nr for r in records] == [1, 2, 3, 4]
