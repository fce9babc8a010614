"""The expiry index's table in memory and Appends carrying expireAfter, for tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta

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
from tables.expiry import ExpiryIndex, deadline_of
from tests.support import actions as a

T0_MS = round(a.T0.timestamp() * 1000)


class Table:
    """The expiry table as the agent and the purger use it, one dict per partition."""

    def __init__(self) -> None:
        self.partitions: dict[int, dict[bytes, int]] = {}
        self.reads = 0
        self.partition = 0  # Faust's current event's (writes go there)

    def get(self, key: bytes) -> int | None:
        self.reads += 1
        return self.partitions.get(self.partition, {}).get(key)

    def set(self, key: bytes, at: int) -> None:
        self.partitions.setdefault(self.partition, {})[key] = at

    def delete(self, key: bytes) -> None:
        del self.partitions[self.partition][key]

    def entries(self, partition: int) -> Iterator[tuple[bytes, int]]:
        yield from self.partitions.get(partition, {}).items()


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
