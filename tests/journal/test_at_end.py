"""Appends at the journal's end (journal/client/conditional.py) over an in-memory log: the
protocol's numbering, retries after a rival's record and keyed retries, without servers.

`MemoryLog` stands in for one partition and for the reading flow over it (fence, head, events):
it folds with the one fold (`JournalState.apply`), so a verdict is the log's as in Kafka.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from journal.client.conditional import (
    AT_END_ATTEMPTS,
    ConditionalAppends,
    Idempotency,
    Numbered,
    Produce,
)
from journal.client.reading import ReadingFlow
from journal.core.fold import JournalState
from journal.core.index import IndexAnswer, NotIndexed, RecordIndex
from journal.core.model import (
    Appended,
    AppendHeader,
    DeleteHeader,
    Event,
    EventRecord,
    JournalKey,
    PayloadType,
    Position,
    SeqRange,
)
from journal.errors import (
    IdempotencyKeyReused,
    IdempotencyUnresolved,
    KafkaUnavailable,
    OutcomeUnknown,
    SeqNrConflict,
)
from journal.kafka.head import JournalHead
from journal.store.base import JournalMeta

KEY = JournalKey("t", "j")


def now() -> datetime:
    """The records' timestamps: the search's window is measured from the real clock."""
    return datetime.now(UTC)


@dataclass
class Record:
    key: JournalKey
    header: AppendHeader | DeleteHeader
    headers: Mapping[str, str]
    timestamp: datetime


@dataclass
class MemoryLog:
    """One partition's records; `rivals` are produced (by another process) just before the
    next of ours, one per produce; `landed_then_lost`: our next produce lands but raises."""

    records: list[Record] = field(default_factory=list)
    rivals: list[int] = field(default_factory=list)  # the counts of the rivals' Appends
    landed_then_lost: bool = False
    lost_before_landing: bool = False
    produced: int = 0  # our records

    def add(
        self, key: JournalKey, first: int, count: int, headers: Mapping[str, str], at: datetime
    ) -> int:
        header = AppendHeader(SeqRange(first, first + count - 1), PayloadType.JSON)
        self.records.append(Record(key, header, dict(headers), at))
        return len(self.records) - 1

    def rival(self, count: int = 1, at: datetime | None = None) -> None:
        """Another process appends at the end as it sees it."""
        self.add(KEY, self.state(KEY).seq_nr + 1, count, {}, now() if at is None else at)

    def delete(self, to: int) -> None:
        self.records.append(Record(KEY, DeleteHeader(to), {}, now()))

    def state(self, key: JournalKey, until: int | None = None) -> JournalState:
        return self.fold(key, until)[0]

    def fold(self, key: JournalKey, until: int | None = None) -> tuple[JournalState, list[int]]:
        """The journal below `until` and the offsets of its accepted Appends."""
        state, accepted = JournalState(), []
        for offset, record in enumerate(self.records[:until]):
            if record.key == key:
                state, _ = state.apply(record.header, offset)
                if state.offset == offset and isinstance(record.header, AppendHeader):
                    accepted.append(offset)
        return state, accepted

    def events(self, key: JournalKey, until: int | None = None) -> list[EventRecord]:
        """The journal's events above its deleteTo, as every read returns them."""
        state, accepted = self.fold(key, until)
        out = []
        for offset in accepted:
            record = self.records[offset]
            assert isinstance(record.header, AppendHeader)
            deleted = range(record.header.range.from_, state.delete_to + 1)
            for n in range(record.header.range.from_, record.header.range.to + 1):
                if n in deleted:
                    continue
                out.append(
                    EventRecord(Event(n), record.timestamp, 0, offset, headers=record.headers)
                )
        return out

    def numbered(self, count: int) -> Numbered:
        def number(first: int) -> tuple[AppendHeader, Produce]:
            header = AppendHeader(SeqRange(first, first + count - 1), PayloadType.JSON)

            async def produce(extra: Mapping[str, str]) -> Position:
                await asyncio.sleep(0)  # let other writers run meanwhile
                if self.rivals:
                    self.rival(self.rivals.pop(0))
                if self.lost_before_landing:
                    self.lost_before_landing = False
                    raise KafkaUnavailable("the broker went away before it got the record")
                offset = self.add(KEY, first, count, extra, now())
                self.produced += 1
                if self.landed_then_lost:
                    self.landed_then_lost = False
                    raise KafkaUnavailable("the broker went away with the acknowledgement")
                return Position(0, offset)

            return header, produce

        return number

    def process(self, search_events: int = 4096) -> ConditionalAppends:
        """A process's conditional appends over this log (each its own lock and memory)."""
        reading = cast(ReadingFlow, _MemoryReading(self))  # the flow's face, over this log
        return ConditionalAppends(reading, _NoIndex(), search_events=search_events)


@dataclass
class _MemoryReading:
    """What conditional appends ask of the reading flow, answered from a `MemoryLog`."""

    log: MemoryLog
    predecessor: None = None  # not a grown topic's

    def partition_of(self, key: JournalKey) -> int:
        return 0

    async def check_cut(self, key: JournalKey, partition: int, fence: int) -> None:
        return None  # never grown

    @property
    def fence(self) -> _Fence:
        return _Fence(self.log)

    @property
    def store(self) -> _NoStore:
        return _NoStore()

    async def head(
        self, key: JournalKey, until: int | None = None, index: RecordIndex | None = None
    ) -> JournalHead:
        log = self.log
        return JournalHead(log.state(key, until), events=tuple(log.events(key, until)))

    async def event(self, key: JournalKey, seq_nr: int) -> EventRecord | None:
        return next((e for e in self.log.events(key) if e.seq_nr == seq_nr), None)

    async def read(self, key: JournalKey, from_: int, to: int) -> AsyncIterator[EventRecord]:
        for record in self.log.events(key):
            if from_ <= record.seq_nr <= to:
                yield record


class _NoStore:
    async def meta(self, key: JournalKey) -> JournalMeta | None:
        return None


@dataclass
class _Fence:
    log: MemoryLog

    async def fence(self, key: JournalKey, partition: int) -> int:
        return len(self.log.records)

    async def close(self) -> None:
        pass


class _NoIndex:
    """An index that never knows: every look and verdict takes the reading flow."""

    def covered(self, partition: int) -> int:
        return -1

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        return NotIndexed("memory")

    async def close(self) -> None:
        pass


def seq_nrs(log: MemoryLog) -> list[int]:
    return [e.seq_nr for e in log.events(KEY)]


async def at_end(
    appends: ConditionalAppends,
    log: MemoryLog,
    count: int,
    expected: int | None = None,
    key: Idempotency | None = None,
) -> Appended:
    return await appends.append_at_end(KEY, count, log.numbered(count), expected, key)


async def test_events_are_numbered_from_the_journals_end() -> None:
    log = MemoryLog()
    appends = log.process()
    first = await at_end(appends, log, 2)
    second = await at_end(appends, log, 3)
    assert (first.seq_nrs, second.seq_nrs) == (SeqRange(1, 2), SeqRange(3, 5))
    assert (first.offset, second.offset) == (0, 1)
    assert seq_nrs(log) == [1, 2, 3, 4, 5]


async def test_concurrent_writers_through_one_process_never_conflict() -> None:
    log = MemoryLog()
    appends = log.process()
    answers = await asyncio.gather(*(at_end(appends, log, 1 + n % 3) for n in range(8)))
    ranges = sorted((a.seq_nrs.from_, a.seq_nrs.to) for a in answers)
    total = sum(1 + n % 3 for n in range(8))
    assert seq_nrs(log) == list(range(1, total + 1))
    assert [low for low, _ in ranges] == [1] + [high + 1 for _, high in ranges[:-1]]
    assert log.produced == 8  # no attempt lost
    for answer in answers:  # each answer's range holds exactly its Append's events
        held = [e.seq_nr for e in log.events(KEY) if e.offset == answer.offset]
        assert held == list(range(answer.seq_nrs.from_, answer.seq_nrs.to + 1))


async def test_a_rivals_record_makes_it_number_again_after_it() -> None:
    log = MemoryLog()
    appends = log.process()
    await at_end(appends, log, 2)
    log.rivals = [1, 2]  # two records of another process, each just before ours
    appended = await at_end(appends, log, 2)
    assert appended.seq_nrs == SeqRange(6, 7)
    assert seq_nrs(log) == [1, 2, 3, 4, 5, 6, 7]
    assert log.produced == 1 + 3  # two attempts lost (invisible), the third accepted


async def test_a_rival_before_every_attempt_is_a_conflict_after_the_bounded_retries() -> None:
    log = MemoryLog()
    appends = log.process()
    log.rivals = [1] * AT_END_ATTEMPTS
    with pytest.raises(SeqNrConflict) as conflict:
        await at_end(appends, log, 1)
    assert conflict.value.seq_nr == AT_END_ATTEMPTS
    assert seq_nrs(log) == list(range(1, AT_END_ATTEMPTS + 1))  # nothing of ours visible


async def test_an_expected_seq_nr_appends_at_the_end_only_if_the_journal_is_there() -> None:
    log = MemoryLog()
    appends = log.process()
    await at_end(appends, log, 2)
    assert (await at_end(appends, log, 1, expected=2)).seq_nrs == SeqRange(3, 3)
    with pytest.raises(SeqNrConflict) as conflict:
        await at_end(appends, log, 1, expected=2)
    assert conflict.value.seq_nr == 3
    assert seq_nrs(log) == [1, 2, 3]


async def test_a_keyed_retry_answers_the_first_attempt_here_and_in_another_process() -> None:
    log = MemoryLog()
    appends, key = log.process(), Idempotency("k1", "digest")
    await at_end(appends, log, 1)
    first = await at_end(appends, log, 2, key=key)
    await at_end(appends, log, 1)
    assert await at_end(appends, log, 2, key=key) == first  # remembered here
    assert await at_end(log.process(), log, 2, key=key) == first  # found in the journal
    with pytest.raises(IdempotencyKeyReused):
        await at_end(appends, log, 2, key=Idempotency("k1", "other"))
    with pytest.raises(IdempotencyKeyReused):
        await at_end(log.process(), log, 2, key=Idempotency("k1", "other"))
    assert seq_nrs(log) == [1, 2, 3, 4]
    assert first.seq_nrs == SeqRange(2, 3)


async def test_a_keyed_retry_of_an_unknown_outcome_learns_it_and_never_appends_twice() -> None:
    log = MemoryLog()
    appends, key = log.process(), Idempotency("k", "digest")
    log.landed_then_lost = True
    with pytest.raises(OutcomeUnknown):
        await at_end(appends, log, 2, key=key)
    assert seq_nrs(log) == [1, 2]  # it did land
    retried = await at_end(appends, log, 2, key=key)
    assert (retried.seq_nrs, log.produced) == (SeqRange(1, 2), 1)
    # one that did not land is retried at the seqNrs it was given, while they are free
    other = Idempotency("k2", "digest")
    log.lost_before_landing = True
    with pytest.raises(OutcomeUnknown):
        await at_end(appends, log, 1, key=other)
    assert (await at_end(appends, log, 1, key=other)).seq_nrs == SeqRange(3, 3)
    assert seq_nrs(log) == [1, 2, 3]


async def test_the_search_for_a_first_attempt_is_bounded_and_says_when_it_cannot_tell() -> None:
    log = MemoryLog()
    for _ in range(40):
        log.rival(1)  # young events, none with the key
    bounded = log.process(search_events=16)
    with pytest.raises(IdempotencyUnresolved):
        await at_end(bounded, log, 1, key=Idempotency("k", "digest"))
    assert len(log.records) == 40  # nothing produced
    # the whole journal searched: no earlier attempt, so it is appended
    assert (await at_end(log.process(), log, 1, key=Idempotency("k", "d"))).seq_nrs == SeqRange(
        41, 41
    )
    # events older than the retry window end the search: none older can be a retry's
    old = MemoryLog()
    for _ in range(40):
        old.rival(1, at=now() - timedelta(hours=1))
    old.rival(1)
    appended = await at_end(old.process(search_events=16), old, 1, key=Idempotency("k", "d"))
    assert appended.seq_nrs == SeqRange(42, 42)


async def test_a_keyed_append_at_the_end_searches_down_to_the_deleted_events_only() -> None:
    """Issue 38 item 8: deleted events end the search as the journal's start does. An attempt
    among them is forgotten with them, as a key is remembered only as long as its event is."""
    log = MemoryLog()
    log.rival(2)
    log.delete(1)
    fresh = await at_end(log.process(), log, 1, key=Idempotency("new", "d"))
    assert fresh.seq_nrs == SeqRange(3, 3)
    # a retry still finds its first attempt above the deleted events, in another process too
    assert await at_end(log.process(), log, 1, key=Idempotency("new", "d")) == fresh
    # deleted up to the end: nothing to search
    log.delete(3)
    appended = await at_end(log.process(), log, 1, key=Idempotency("newer", "d"))
    assert appended.seq_nrs == SeqRange(4, 4)
    # the limit, as documented: a retry whose first attempt a Delete removed appends again
    assert await at_end(log.process(), log, 1, key=Idempotency("newer", "d")) == appended
    log.delete(4)
    assert (await at_end(log.process(), log, 1, key=Idempotency("newer", "d"))).seq_nrs == (
        SeqRange(5, 5)
    )
    assert seq_nrs(log) == [5]


async def test_an_unknown_outcome_at_the_end_says_how_to_repeat_it() -> None:
    """Issue 38 item 6: without a key, a repeat is numbered anew (appended twice if the first
    took effect): not repeatable; with one, the error names the key a repeat must carry."""
    log = MemoryLog()
    appends = log.process()
    log.landed_then_lost = True
    with pytest.raises(OutcomeUnknown) as unkeyed:
        await at_end(appends, log, 1)
    assert (unkeyed.value.repeatable, unkeyed.value.idempotency_key) == (False, None)
    log.landed_then_lost = True
    with pytest.raises(OutcomeUnknown) as keyed:
        await at_end(appends, log, 1, key=Idempotency("k", "d"))
    assert (keyed.value.repeatable, keyed.value.idempotency_key) == (True, "k")


async def test_a_fresh_key_is_not_searched_for_and_its_repeat_finds_the_first_attempt() -> None:
    """A key made for the call (the direct client's default) has no earlier attempt: on a
    journal too busy for the search, it appends where a key of the caller's cannot tell."""
    log = MemoryLog()
    for _ in range(40):
        log.rival(1)  # young events, none with the key
    with pytest.raises(IdempotencyUnresolved):
        await at_end(log.process(search_events=16), log, 1, key=Idempotency("mine", "d"))
    log.landed_then_lost = True
    with pytest.raises(OutcomeUnknown) as unknown:
        await at_end(log.process(search_events=16), log, 1, key=Idempotency("new", "d", True))
    assert unknown.value.idempotency_key == "new"
    repeat = Idempotency(unknown.value.idempotency_key, "d")  # not fresh: searched, and found
    assert (await at_end(log.process(search_events=16), log, 1, key=repeat)).seq_nrs == SeqRange(
        41, 41
    )
    assert seq_nrs(log) == list(range(1, 42))


async def test_writers_waiting_together_are_numbered_in_one_round() -> None:
    log = MemoryLog()
    appends = log.process()
    looks = 0
    look = appends.look

    async def counted(key: JournalKey) -> JournalState:
        nonlocal looks
        looks += 1
        return await look(key)

    appends.look = counted  # type: ignore[method-assign]
    answers = await asyncio.gather(*(at_end(appends, log, 1) for _ in range(8)))
    assert sorted(a.seq_nrs.from_ for a in answers) == list(range(1, 9))
    assert looks == 1  # all eight arrived before the round began: one look numbers them all


async def test_a_rival_within_a_round_makes_the_round_number_again_after_it() -> None:
    log = MemoryLog()
    appends = log.process()
    log.rivals = [1]  # lands just before the first of our records
    answers = await asyncio.gather(*(at_end(appends, log, 2) for _ in range(3)))
    assert seq_nrs(log) == list(range(1, 1 + 1 + 3 * 2))
    assert log.produced == 3 + 3  # the round lost to the rival (invisible), then all accepted
    assert sorted(a.seq_nrs.from_ for a in answers) == [2, 4, 6]


async def test_a_lost_produce_in_a_round_is_unknown_and_the_others_are_accepted() -> None:
    log = MemoryLog()
    appends = log.process()
    await at_end(appends, log, 1)
    log.lost_before_landing = True  # the next of ours never lands
    answers = await asyncio.gather(
        *(at_end(appends, log, 1) for _ in range(3)), return_exceptions=True
    )
    unknown = [a for a in answers if isinstance(a, OutcomeUnknown)]
    accepted = sorted(a.seq_nrs.from_ for a in answers if isinstance(a, Appended))
    assert len(unknown) == 1
    assert accepted == [2, 3]
    assert seq_nrs(log) == [1, 2, 3]
