"""The expiry index's table in memory and Appends carrying expireAfter, for tests."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from journal.core.model import (
    ActionRecord,
    AppendHeader,
    Event,
    EventRecord,
    JournalKey,
    PayloadMetadata,
    PayloadType,
    SeqRange,
)
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
    journal_id: str, offset: int, expire_after: str | None, after_ms: int = 0
) -> ActionRecord:
    """An Append as the agent's parse gives it (events decoded), written `after_ms` past T0."""
    key = JournalKey("t", journal_id)
    at = a.T0 + timedelta(milliseconds=after_ms)
    event = EventRecord(Event(1), at, 0, offset, PayloadMetadata(expire_after=expire_after))
    header = AppendHeader(SeqRange(1, 1), PayloadType.JSON)
    return ActionRecord(key, 0, offset, at, header, events=(event,))
