"""Builders of action records for tests: what a consumer would hand the core."""

from __future__ import annotations

from datetime import UTC, datetime

from journal.codec import encode_events
from journal.core.model import (
    ActionHeader,
    ActionRecord,
    AppendHeader,
    DeleteHeader,
    Event,
    Events,
    JournalKey,
    JsonPayload,
    MarkHeader,
    PurgeHeader,
    SeqRange,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def event(seq_nr: int) -> Event:
    return Event(seq_nr, frozenset({f"t{seq_nr % 3}"}), JsonPayload.of({"n": seq_nr}))


def record(key: JournalKey, offset: int, header: ActionHeader, value: bytes = b"") -> ActionRecord:
    return ActionRecord(key, 0, offset, T0, header, value)


def append(key: JournalKey, offset: int, first: int, last: int) -> ActionRecord:
    events = Events(tuple(event(n) for n in range(first, last + 1)))
    payload_type, value = encode_events(events)
    return record(key, offset, AppendHeader(SeqRange(first, last), payload_type), value)


def delete(key: JournalKey, offset: int, to: int) -> ActionRecord:
    return record(key, offset, DeleteHeader(to))


def purge(key: JournalKey, offset: int) -> ActionRecord:
    return record(key, offset, PurgeHeader())


def mark(key: JournalKey, offset: int) -> ActionRecord:
    return record(key, offset, MarkHeader("m"))
