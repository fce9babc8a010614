"""The journal's domain: keys, seqNrs, events and the actions that travel through Kafka.

Everything here is plain immutable data with validation at construction, so an invalid
value cannot reach the codec, the writer or the store.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TypeAlias

# raised by the validation below; defined with the other errors, re-exported for callers
from journal.errors import InvalidValue as InvalidValue

SEQ_NR_MIN = 1
SEQ_NR_MAX = 2**63 - 1

Json: TypeAlias = "bool | int | float | str | list[Json] | dict[str, Json] | None"


def check_seq_nr(seq_nr: int, name: str = "seqNr") -> int:
    if isinstance(seq_nr, bool) or not isinstance(seq_nr, int):
        raise InvalidValue(f"{name} must be an integer, got {seq_nr!r}")
    if not SEQ_NR_MIN <= seq_nr <= SEQ_NR_MAX:
        raise InvalidValue(f"{name} must be in {SEQ_NR_MIN}..{SEQ_NR_MAX}, got {seq_nr}")
    return seq_nr


@dataclass(frozen=True, slots=True)
class JournalKey:
    """A journal's address: the Kafka topic it lives in and its id (the record key)."""

    topic: str
    id: str

    def __post_init__(self) -> None:
        if not self.topic:
            raise InvalidValue("topic must not be empty")
        if not self.id:
            raise InvalidValue("journal id must not be empty")

    def __str__(self) -> str:
        return f"{self.topic}:{self.id}"


@dataclass(frozen=True, slots=True)
class SeqRange:
    """An inclusive range of seqNrs, `from_ <= to`."""

    from_: int
    to: int

    def __post_init__(self) -> None:
        check_seq_nr(self.from_, "range.from")
        check_seq_nr(self.to, "range.to")
        if self.from_ > self.to:
            raise InvalidValue(f"range.from {self.from_} is above range.to {self.to}")

    def __contains__(self, seq_nr: object) -> bool:
        return isinstance(seq_nr, int) and self.from_ <= seq_nr <= self.to


class PayloadType(Enum):
    """How an Append's record value is encoded (kafka-journal's `payloadType`)."""

    BINARY = "binary"
    JSON = "json"
    TEXT = "text"  # an event's payload kind only; a record value is never of this type


@dataclass(frozen=True, slots=True)
class JsonPayload:
    value: Json


@dataclass(frozen=True, slots=True)
class TextPayload:
    value: str


@dataclass(frozen=True, slots=True)
class BinaryPayload:
    value: bytes


Payload: TypeAlias = JsonPayload | TextPayload | BinaryPayload


@dataclass(frozen=True, slots=True)
class Event:
    """One event of a journal. `payload` is None for an event that carries only its seqNr.

    A JSON null payload is no payload: kafka-journal reads `"payload": null` back as none, so
    its users never see a null payload; normalising here gives this journal's users the same
    answer whichever way the event travels (API, direct client, JSON or binary record, store).
    """

    seq_nr: int
    tags: frozenset[str] = frozenset()
    payload: Payload | None = None

    def __post_init__(self) -> None:
        check_seq_nr(self.seq_nr)
        if isinstance(self.payload, JsonPayload) and self.payload.value is None:
            object.__setattr__(self, "payload", None)  # frozen: the one normalisation


@dataclass(frozen=True, slots=True)
class PayloadMetadata:
    """Metadata stored with the events of an Append (kafka-journal's RecordMetadata.payload)."""

    expire_after: str | None = None  # kafka-journal's duration text, e.g. "1 day"
    data: Json = None


@dataclass(frozen=True, slots=True)
class HeaderMetadata:
    """Metadata carried in the action header of an Append (kafka-journal's header metadata)."""

    data: Json = None


def check_consecutive(events: tuple[Event, ...]) -> SeqRange:
    """The range of a batch of events; raises InvalidValue unless they are consecutive."""
    if not events:
        raise InvalidValue("an append needs at least one event")
    first = events[0].seq_nr
    # one comparison of lists in C: every record a read or subscription decodes passes here
    if [event.seq_nr for event in events] == list(range(first, first + len(events))):
        return SeqRange(first, events[-1].seq_nr)
    for previous, current in itertools.pairwise(events):
        if current.seq_nr != previous.seq_nr + 1:
            raise InvalidValue(
                f"seqNrs must be consecutive: {current.seq_nr} follows {previous.seq_nr}"
            )
    return SeqRange(events[0].seq_nr, events[-1].seq_nr)


@dataclass(frozen=True, slots=True)
class Events:
    """The events of one Append with their metadata: the decoded record value."""

    events: tuple[Event, ...]
    metadata: PayloadMetadata = PayloadMetadata()

    @property
    def range(self) -> SeqRange:
        return check_consecutive(self.events)


# Action headers: what travels in the `journal.action` record header.


@dataclass(frozen=True, slots=True)
class AppendHeader:
    range: SeqRange
    payload_type: PayloadType
    origin: str | None = None
    version: str | None = None
    metadata: HeaderMetadata = HeaderMetadata()


@dataclass(frozen=True, slots=True)
class DeleteHeader:
    to: int
    origin: str | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        check_seq_nr(self.to, "delete.to")


@dataclass(frozen=True, slots=True)
class PurgeHeader:
    origin: str | None = None
    version: str | None = None


@dataclass(frozen=True, slots=True)
class MarkHeader:
    id: str
    origin: str | None = None
    version: str | None = None


ActionHeader: TypeAlias = AppendHeader | DeleteHeader | PurgeHeader | MarkHeader


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One record of the action topic as the core sees it, payload still encoded.

    `value` is the raw record value: the encoded Events of an Append, empty otherwise.
    Decoding it is deferred so that a reader can skip records without touching payloads.
    """

    key: JournalKey
    partition: int
    offset: int
    timestamp: datetime
    header: ActionHeader
    value: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    # An Append's events once replication has decoded them to check them
    # (`journal.codec.actions.parse_checked`), so they are decoded once; not part of its identity.
    events: tuple[EventRecord, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An event as a read returns it: the event plus where and when it was written."""

    event: Event
    timestamp: datetime
    partition: int
    offset: int
    metadata: PayloadMetadata = PayloadMetadata()
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def seq_nr(self) -> int:
        return self.event.seq_nr


@dataclass(frozen=True, slots=True)
class Position:
    """Where an action landed in Kafka."""

    partition: int
    offset: int
