"""The journal's domain: keys, seqNrs, events and the actions that travel through Kafka.

Everything here is plain immutable data. Values built once per action (keys, ranges, headers)
check themselves at construction. They are msgspec structs too, which build in a third of a
frozen dataclass' time: every append and every decoded record builds a range and a header. Values
built once per *event* (`Event`, its payload, `EventRecord`) are slotted structs the garbage
collector does not track and that check nothing when built: a journal's reads, replication and
subscriptions make millions of them. Their entry points check them instead:
`check_consecutive` (every append, every decoded record) and `JsonPayload.of` /
`json_payload` (every JSON payload that did not arrive as checked JSON text).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import TypeAlias, cast

import msgspec
import orjson

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


class JournalKey(msgspec.Struct, frozen=True, gc=False):
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


class SeqRange(msgspec.Struct, frozen=True, gc=False):
    """An inclusive range of seqNrs, `from_ <= to`."""

    from_: int
    to: int

    def __post_init__(self) -> None:
        from_, to = self.from_, self.to
        # every append and decoded record builds one: the valid case in one test (`type is
        # int` keeps bools out, as check_seq_nr does; anything else takes the named checks)
        if type(from_) is int and type(to) is int and SEQ_NR_MIN <= from_ <= to <= SEQ_NR_MAX:
            return
        check_seq_nr(from_, "range.from")
        check_seq_nr(to, "range.to")
        if from_ > to:
            raise InvalidValue(f"range.from {self.from_} is above range.to {self.to}")

    def __contains__(self, seq_nr: object) -> bool:
        return isinstance(seq_nr, int) and self.from_ <= seq_nr <= self.to


class PayloadType(Enum):
    """How an Append's record value is encoded (kafka-journal's `payloadType`)."""

    BINARY = "binary"
    JSON = "json"
    TEXT = "text"  # an event's payload kind only; a record value is never of this type


class JsonPayload(msgspec.Struct, frozen=True, gc=False):
    """A JSON payload as its text: checked once where it entered, then carried as these bytes
    into the record value, the store's column and a read's answer, never parsed again on the
    way. The bytes are the payload: number spellings and integers beyond 64 bits survive, and
    two spellings of one value are two payloads (compare `value`s to compare meanings)."""

    raw: bytes

    @classmethod
    def of(cls, value: Json) -> JsonPayload:
        """`value` written as compact JSON; InvalidValue unless it is strictly a Json value."""
        return cls(encode_json(value, "payload"))

    @property
    def value(self) -> Json:
        return cast(Json, msgspec.json.decode(self.raw))


class TextPayload(msgspec.Struct, frozen=True, gc=False):
    value: str


class BinaryPayload(msgspec.Struct, frozen=True, gc=False):
    value: bytes


Payload: TypeAlias = JsonPayload | TextPayload | BinaryPayload

_NULL = b"null"


def json_payload(raw: bytes) -> JsonPayload | None:
    """A payload from JSON text a decoder checked already; None for `null`.

    A JSON null payload is no payload: kafka-journal reads `"payload": null` back as none, so
    its users never see a null payload. Every JSON payload passes here or through `of_json`, so
    this journal's users get that answer whichever way an event travels."""
    return None if raw == _NULL else JsonPayload(raw)


_JSON_TEXT = msgspec.json.Decoder(msgspec.Raw)


def checked_json_payload(text: bytes) -> JsonPayload | None:
    """A payload from JSON text not checked yet; InvalidValue unless it is one JSON value.
    Checking only delimits the value (no Python objects are built); whitespace around it goes."""
    try:
        return json_payload(bytes(_JSON_TEXT.decode(text)))
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise InvalidValue(f"payload is not valid JSON: {e}") from e


def of_json(value: Json) -> JsonPayload | None:
    """A payload from a decoded JSON value; None for null (see `json_payload`)."""
    return None if value is None else JsonPayload.of(value)


def encode_json(value: object, what: str) -> bytes:
    """`value` as compact JSON; InvalidValue unless it is strictly a Json value.

    orjson writes it (msgspec when it holds an integer beyond 64 bits, which orjson refuses).
    Both refuse much (lone surrogates, most foreign types) but write NaN as null, tuples as
    lists, dates, UUIDs or enums as text: each reads back as another value. So the bytes are
    read back and compared, all in C, which costs less than a walk of the value in Python."""
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:
        try:
            encoded = msgspec.json.encode(value)
        except (TypeError, ValueError, OverflowError, UnicodeError) as e:
            raise InvalidValue(f"{what} cannot be written as JSON: {e}") from e
    if msgspec.json.decode(encoded) != value:
        raise InvalidValue(f"{what} would not read back as the same JSON value: {value!r:.200}")
    return encoded


class Event(msgspec.Struct, frozen=True, gc=False):
    """One event of a journal. `payload` is None for an event that carries only its seqNr.

    Built unchecked (see the module's docstring): `check_consecutive` checks the seqNrs of an
    append's events; a JSON payload was checked where its text was made."""

    seq_nr: int
    tags: frozenset[str] = frozenset()
    payload: Payload | None = None


class NewEvent(msgspec.Struct, frozen=True, gc=False):
    """An event to append at the journal's end: the seqNr is the journal's to give
    (`Journal.append_at_end`)."""

    tags: frozenset[str] = frozenset()
    payload: Payload | None = None

    def numbered(self, seq_nr: int) -> Event:
        return Event(seq_nr, self.tags, self.payload)


class PayloadMetadata(msgspec.Struct, frozen=True, gc=False):
    """Metadata stored with the events of an Append (kafka-journal's RecordMetadata.payload)."""

    expire_after: str | None = None  # kafka-journal's duration text, e.g. "1 day"
    data: Json = None


class HeaderMetadata(msgspec.Struct, frozen=True, gc=False):
    """Metadata carried in the action header of an Append (kafka-journal's header metadata)."""

    data: Json = None


def check_consecutive(events: tuple[Event, ...]) -> SeqRange:
    """The range of a batch of events; raises InvalidValue unless they are consecutive seqNrs
    in SEQ_NR_MIN..SEQ_NR_MAX (the range checks its ends)."""
    if not events:
        raise InvalidValue("an append needs at least one event")
    first = check_seq_nr(events[0].seq_nr)
    if len(events) == 1:  # most appends: no lists to build
        return SeqRange(first, first)
    # one comparison of lists in C: every record a read or subscription decodes passes here
    if [event.seq_nr for event in events] == list(range(first, first + len(events))):
        return SeqRange(first, events[-1].seq_nr)
    for previous, current in itertools.pairwise(events):
        if current.seq_nr != previous.seq_nr + 1:
            raise InvalidValue(
                f"seqNrs must be consecutive: {current.seq_nr} follows {previous.seq_nr}"
            )
    return SeqRange(events[0].seq_nr, events[-1].seq_nr)


class Events(msgspec.Struct, frozen=True, gc=False):
    """The events of one Append with their metadata: the decoded record value."""

    events: tuple[Event, ...]
    metadata: PayloadMetadata = PayloadMetadata()

    @property
    def range(self) -> SeqRange:
        return check_consecutive(self.events)


# Action headers: what travels in the `journal.action` record header.


class AppendHeader(msgspec.Struct, frozen=True, gc=False):
    range: SeqRange
    payload_type: PayloadType
    origin: str | None = None
    version: str | None = None
    metadata: HeaderMetadata = HeaderMetadata()


class DeleteHeader(msgspec.Struct, frozen=True, gc=False):
    to: int
    origin: str | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        check_seq_nr(self.to, "delete.to")


class PurgeHeader(msgspec.Struct, frozen=True, gc=False):
    origin: str | None = None
    version: str | None = None


class MarkHeader(msgspec.Struct, frozen=True, gc=False):
    id: str
    origin: str | None = None
    version: str | None = None


ActionHeader: TypeAlias = AppendHeader | DeleteHeader | PurgeHeader | MarkHeader


class ActionRecord(msgspec.Struct, frozen=True, gc=False):
    """One record of the action topic as the core sees it, payload still encoded.

    `value` is the raw record value: the encoded Events of an Append, empty otherwise.
    Decoding it is deferred so that a reader can skip records without touching payloads.
    One per record a read, replication or a subscription meets: untracked by the GC, like
    the per-event values.
    """

    key: JournalKey
    partition: int
    offset: int
    timestamp: datetime
    header: ActionHeader
    value: bytes = b""
    headers: Mapping[str, str] = {}
    # An Append's events once replication has decoded them to check them
    # (`journal.codec.actions.parse_checked`), so they are decoded once. Nothing compares
    # records (they are values of a log, known by their offsets): equality is by every field.
    events: tuple[EventRecord, ...] | None = None


class EventRecord(msgspec.Struct, frozen=True, gc=False):
    """An event as a read returns it: the event plus where and when it was written."""

    event: Event
    timestamp: datetime
    partition: int
    offset: int
    metadata: PayloadMetadata = PayloadMetadata()
    headers: Mapping[str, str] = {}

    @property
    def seq_nr(self) -> int:
        return self.event.seq_nr


class Position(msgspec.Struct, frozen=True, gc=False):
    """Where an action landed in Kafka."""

    partition: int
    offset: int


class Ack(Enum):
    """When an append is answered: VERIFIED once the log's fold accepted it (else
    SeqNrConflict), KAFKA once Kafka acknowledged the record (acks=all), fold unseen: for a
    writer that knows it is the journal's only one."""

    VERIFIED = "verified"
    KAFKA = "kafka"


class Appended(Position, frozen=True, gc=False):
    """An append's answer: where its record landed, and the seqNrs its events have there."""

    seq_nrs: SeqRange

    @classmethod
    def at(cls, position: Position, seq_nrs: SeqRange) -> Appended:
        return cls(position.partition, position.offset, seq_nrs)


class Deleted(msgspec.Struct, frozen=True, gc=False):
    """A delete's answer: the journal's deleteTo as the fold left it at the Delete's record
    (None: nothing deleted), and where the Delete landed (None: it deleted nothing new)."""

    delete_to: int | None
    position: Position | None
