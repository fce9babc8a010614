"""The expiry index's tables in memory and Appends carrying expireAfter, for tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from journal.core.fold import JournalState, Verdict
from journal.core.model import (
    ActionRecord,
    AppendHeader,
    Event,
    EventRecord,
    JournalKey,
    PayloadMetadata,
    PayloadType,
    Position,
    SeqRange,
)
from tables.expiry import TIMED, ExpiryIndex, FaustExpiryTable, deadline_of, of_time_key
from tests.support import actions as a

T0_MS = round(a.T0.timestamp() * 1000)


class FaustTable:
    """A Faust table of the RocksDB store as the expiry table uses it: a dict per partition,
    written in the current event's (`partition`), read there or, in key order, in one named
    partition (`entries`, which counts the entries it yields)."""

    def __init__(self) -> None:
        self.partitions: dict[int, dict[bytes, bytes]] = {}
        self.partition = 0  # Faust's current event's
        self.gets = 0
        self.read = 0  # entries yielded by `entries`

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return self.partitions.get(self.partition, {}).get(key)

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.partitions.setdefault(self.partition, {})[key] = value

    def __delitem__(self, key: bytes) -> None:
        del self.partitions[self.partition][key]


def entries(table: Any, partition: int, from_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    """`tables.store.partition_entries` over a `FaustTable`: RocksDB's key order (sorting is
    this fake's cost, not the store's)."""
    held = table.partitions.get(partition, {})
    for key in sorted(k for k in held if from_key is None or k >= from_key):
        table.read += 1
        yield key, held[key]


class Table(FaustExpiryTable):
    """The expiry tables as the agent and the purger use them, over `FaustTable`s."""

    def __init__(self) -> None:
        self.by_id, self.by_time = FaustTable(), FaustTable()
        super().__init__(self.by_id, self.by_time, entries)

    @property
    def partition(self) -> int:
        return self.by_id.partition

    @partition.setter
    def partition(self, partition: int) -> None:
        self.by_id.partition = self.by_time.partition = partition

    @property
    def reads(self) -> int:
        """Entries read by id: looked up, or scanned."""
        return self.by_id.gets + self.by_id.read

    @property
    def partitions(self) -> dict[int, dict[bytes, int]]:
        """The deadlines by id, per partition (checking first that those by time match)."""
        for partition in self.by_id.partitions.keys() | self.by_time.partitions.keys():
            self.assert_in_step(partition)
        return {
            partition: {key: int(raw) for key, raw in held.items()}
            for partition, held in self.by_id.partitions.items()
        }

    def times(self, partition: int) -> list[tuple[int, bytes]]:
        """The partition's time entries as (deadline, journal key), in the table's order."""
        held = self.by_time.partitions.get(partition, {})
        return [of_time_key(raw)[::-1] for raw in sorted(held) if raw != TIMED]

    def assert_in_step(self, partition: int) -> None:
        """Every deadline by id has its time entry and no other is there (once the
        partition's are all there: its mark)."""
        by_id = self.by_id.partitions.get(partition, {})
        expected = sorted((int(raw), key) for key, raw in by_id.items())
        if TIMED in self.by_time.partitions.get(partition, {}):
            assert self.times(partition) == expected, partition


def append(
    journal_id: str,
    offset: int,
    expire_after: str | None,
    after_ms: int = 0,
    *,
    seq_nr: int = 1,
    count: int = 1,
    partition: int = 0,
) -> ActionRecord:
    """An Append of `count` events from `seq_nr` as the agent's parse gives it (events
    decoded), written `after_ms` past T0."""
    key = JournalKey("t", journal_id)
    at = a.T0 + timedelta(milliseconds=after_ms)
    metadata = PayloadMetadata(expire_after=expire_after)
    seq_nrs = range(seq_nr, seq_nr + count)
    events = tuple(EventRecord(Event(n), at, partition, offset, metadata) for n in seq_nrs)
    header = AppendHeader(SeqRange(seq_nr, seq_nrs[-1]), PayloadType.JSON)
    return ActionRecord(key, partition, offset, at, header, events=events)


class FoldedDeadlines:
    """`agents.expiry.Deadlines` over a log in memory: the deadline of the last Append the fold
    accepted, as the reading flow finds it."""

    def __init__(self) -> None:
        self.log: list[ActionRecord] = []
        self.reads = 0

    async def deadline(self, key: JournalKey, until: int) -> int | None:
        self.reads += 1
        return fold_deadline(a for a in self.log if a.key == key and a.offset <= until)


def fold_deadline(actions: Iterable[ActionRecord]) -> int | None:
    """The deadline of the last Append the fold accepts of one journal's `actions`."""
    state, last = JournalState(), None
    for action in actions:
        state, verdict = state.apply(action.header, action.offset)
        if verdict is Verdict.APPENDED:
            last = action
        elif verdict is Verdict.PURGED:
            last = None
    return None if last is None else deadline_of(last)


class Log(FoldedDeadlines):
    """The journal writer's purge, the fence and the reading flow's deadlines over one
    partition of a log in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.end = 0
        self.purges: list[tuple[JournalKey, str | None]] = []

    def handle(self, index: ExpiryIndex, action: ActionRecord) -> None:
        """`action` is in the log, and the agent handled it."""
        self.log.append(action)
        index.record(action)

    async def purge(self, key: JournalKey, *, origin: str | None = None) -> Position:
        self.purges.append((key, origin))
        self.end += 1
        return Position(0, self.end - 1)

    async def fence(self, key: JournalKey, partition: int) -> int:
        return self.end

    async def close(self) -> None:
        return None
