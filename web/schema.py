"""The API's requests and answers as pydantic models: the one statement of its schema.

`/openapi.json` (`web.openapi`) is generated from these models, the query parameters are
validated by them and the answers that are not streamed are written from them (`to_json`).
Request bodies are decoded by `web.validation`'s msgspec structs, which take the shape these
models describe, with the rules stated below. Field names are the wire's (camelCase), so an
error's location reads as the client wrote it. Class names are the OpenAPI schemas' names; an
answer that renders a core class is named for it plus `Out` (`PositionOut` renders
`journal.core.model.Position`), so no name here means something else in the core.

Append body (`POST /journals/{id}/events`):

    {"events": [{"seqNr": 1, "payload": <any JSON>, "tags": ["t"]}, ...],
     "metadata": <any JSON>?, "headers": {"name": "value"}?, "expireAfter": "P1D"?,
     "expectedSeqNr": 0?}

Every event has a `seqNr`, or none has: then they are appended at the journal's end.

An event carries at most one of `payload` (any JSON, null included), `payloadText` (a string)
and `payloadBinary` (canonical standard base64); with none it has no payload. seqNrs are
consecutive and in 1..2^63-1. A payload is kept as its JSON text: finite numbers, valid
Unicode, nesting at most `MAX_DEPTH` levels, integers of any size. The metadata is a value the
journal's codec stores: integers in the signed/unsigned 64-bit range besides.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from journal import SEQ_NR_MAX
from journal.client import CONDITIONAL_HEADERS
from journal.client import DEFAULT_LIMIT as DEFAULT_IDS_LIMIT
from journal.client import MAX_LIMIT as MAX_IDS_LIMIT
from journal.codec import ACTION_HEADER
from journal.core import SEQ_NR_MIN
from journal.settings import DEFAULT_QUARANTINE_LIMIT, MAX_QUARANTINE_LIMIT
from web.error_answers import ErrorCode

# The codec writes payloads with orjson, which refuses nesting beyond 254 levels and integers
# outside [-2^63, 2^64-1]; an event adds a few levels around its payload.
MAX_DEPTH = 200
INT_MIN, INT_MAX = -(2**63), 2**64 - 1

JSON_VALUE_REF = "#/components/schemas/JsonValue"
#: any JSON value the codec stores unchanged (nesting and Unicode are checked, not described)
JSON_VALUE_SCHEMA: Final[dict[str, Any]] = {
    "description": "any JSON value; integers in -2^63..2^64-1",
    "anyOf": [
        {"type": ["null", "boolean", "string"]},
        {"type": "integer", "minimum": INT_MIN, "maximum": INT_MAX},
        {"type": "number", "not": {"type": "integer"}},
        # unevaluatedItems (every item, as nothing else evaluates them) rather than items:
        # openapi-spec-validator 0.9 recurses into a self-referencing `items` without end
        {"type": "array", "unevaluatedItems": {"$ref": JSON_VALUE_REF}},
        {"type": "object", "additionalProperties": {"$ref": JSON_VALUE_REF}},
    ],
}
# The canonical encoding only: b64decode would also take surplus padding and stray low bits
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
# The syntax iso_to_duration takes (no years or months; a fraction on the last component
# only); it also checks the value (positive, whole nanoseconds, within Scala's range)
_NUMBER = r"[0-9]+(?:[.,][0-9]+(?=[WDHMS]$))?"
_ISO_DURATION = (
    rf"^P(?!$)(?:{_NUMBER}W)?(?:{_NUMBER}D)?"
    rf"(?:T(?!$)(?:{_NUMBER}H)?(?:{_NUMBER}M)?(?:{_NUMBER}S)?)?$"
)


def absent(**field: Any) -> Any:
    """A field that may be left out but is not nullable (pydantic does not validate defaults).
    For `payload` a null is the JSON value null: `model_fields_set` tells it from absent."""
    return Field(default=None, **field)


def refusal(code: ErrorCode, message: str) -> PydanticCustomError:
    """A validation error with the API's own code; the message follows the field's location."""
    return PydanticCustomError(code.value, message)


RESERVED_HEADERS = frozenset({ACTION_HEADER, *CONDITIONAL_HEADERS})
_RESERVED_NAMES: list[Any] = sorted(RESERVED_HEADERS)  # Any: pydantic types schema extras as JSON


SeqNr = Annotated[StrictInt, Field(ge=SEQ_NR_MIN, le=SEQ_NR_MAX)]
# allOf: pydantic would try to resolve a bare $ref among its own definitions
JsonValue = Annotated[Any, WithJsonSchema({"allOf": [{"$ref": JSON_VALUE_REF}]})]
Base64 = Annotated[
    str,
    WithJsonSchema({"type": "string", "contentEncoding": "base64", "pattern": _BASE64}),
]
ExpireAfter = Annotated[
    StrictStr,
    WithJsonSchema(
        {
            "type": "string",
            "format": "duration",
            "pattern": _ISO_DURATION,
            "description": "ISO 8601, positive, no years or months: P1D, PT1H, PT0.5S.",
            "examples": ["P1D"],
        }
    ),
]
# a payload is kept as its text: any JSON value, integers of any size
PayloadValue = Annotated[
    Any, WithJsonSchema({"description": "any JSON value, kept as written (integers of any size)"})
]

PAYLOAD_FIELDS = ("payload", "payloadText", "payloadBinary")


MAX_ACK_POSITIONS = 100_000


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)


# --- requests -------------------------------------------------------------------------------


class EventIn(_Wire):
    """An event to append: at most one of payload, payloadText, payloadBinary."""

    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "anyOf": [
                    {"required": [a, b]}
                    for i, a in enumerate(PAYLOAD_FIELDS)
                    for b in PAYLOAD_FIELDS[i + 1 :]
                ]
            }
        }
    )

    seqNr: SeqNr = absent(
        description="every event of a body has one (consecutive), or none has: then the "
        "server gives them the journal's next seqNrs (append at the end)"
    )
    payload: PayloadValue = absent()
    payloadText: StrictStr = absent()
    payloadBinary: Base64 = absent()
    tags: list[StrictStr] | None = None


class AppendRequest(_Wire):
    """The body of an append; its events are written atomically as one Kafka record."""

    events: list[EventIn] = Field(
        min_length=1,
        description="Consecutive seqNrs (or none: at the journal's end), written atomically "
        "as one Kafka record.",
        json_schema_extra={  # every event with a seqNr, or none
            "anyOf": [
                {"items": {"required": ["seqNr"]}},
                {"items": {"not": {"required": ["seqNr"]}}},
            ]
        },
    )
    metadata: JsonValue = Field(default=None, description="stored with the events (any JSON)")
    headers: dict[StrictStr, StrictStr] | None = Field(
        default=None,
        description=f"Kafka record headers; {', '.join(sorted(RESERVED_HEADERS))} are reserved.",
        json_schema_extra={"propertyNames": {"minLength": 1, "not": {"enum": _RESERVED_NAMES}}},
    )
    expireAfter: ExpireAfter | None = None
    expectedSeqNr: StrictInt | None = Field(
        default=None,
        ge=0,
        le=SEQ_NR_MAX - 1,
        description="Append only if this is the journal's last seqNr (0: no events), i.e. the "
        "first event's seqNr - 1 (events without seqNrs then get expectedSeqNr + 1 on): 200 "
        "only once the log accepted the append, 409 `seq_nr_conflict` (with the journal's "
        "`seqNr`) if it is elsewhere, and 503 `outcome_unknown` if the verdict could not be "
        "learnt, whatever `ack` says.",
    )


class SnapshotIn(_Wire):
    """The body of `PUT /journals/{id}/snapshots/{seqNr}`: exactly one of payload (any JSON,
    null included), payloadText, payloadBinary (base64), as an event carries it."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": [name]} for name in PAYLOAD_FIELDS],
        }
    )

    payload: PayloadValue = absent()
    payloadText: StrictStr = absent()
    payloadBinary: Base64 = absent()


def _query_number(value: object) -> int:
    """A query parameter's text as an int: ASCII digits only (int() would also take "+1",
    " 1", "1_000" and other scripts' digits), at most 19 of them."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # a caller that already has the number
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    raise refusal(
        ErrorCode.INVALID_QUERY, f"must be a non-negative integer below 2^63, got {value!r}"
    )


# the schema says what Field's bounds check: next to a plain validator, pydantic would write
# them under their own names
QuerySeqNr = Annotated[
    int,
    PlainValidator(_query_number),
    Field(ge=SEQ_NR_MIN, le=SEQ_NR_MAX),
    WithJsonSchema({"type": "integer", "minimum": SEQ_NR_MIN, "maximum": SEQ_NR_MAX}),
]
QueryCount = Annotated[
    int,
    PlainValidator(_query_number),
    Field(ge=0, le=SEQ_NR_MAX),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": SEQ_NR_MAX}),
]


class AppendQuery(_Wire):
    """`POST /journals/{id}/events`: when the append is answered."""

    ack: Literal["verified", "kafka"] = Field(
        default="verified",
        description="verified: 200 once the log's fold accepted the append (409 "
        "`seq_nr_conflict` with the journal's `seqNr` if its first seqNr does not continue the "
        "journal, nothing of it visible; 503 `outcome_unknown` if the verdict could not be "
        "learnt). kafka: 200 once Kafka acknowledged the record (acks=all), the fold unseen: "
        "an append that does not continue the journal is acknowledged and never visible; for "
        "a writer that knows it is the journal's only one. Events without seqNrs need "
        "`verified`.",
    )


class ReadQuery(_Wire):
    """`GET /journals/{id}/events`: events in [from, to], at most `limit`."""

    from_: QuerySeqNr = Field(default=SEQ_NR_MIN, alias="from", description="first seqNr")
    to: QuerySeqNr = Field(default=SEQ_NR_MAX, description="last seqNr")
    limit: QueryCount = absent(description="at most this many events (default: no limit)")


class DeleteQuery(_Wire):
    """`DELETE /journals/{id}/events`: delete up to `to`."""

    to: QuerySeqNr = Field(description="delete up to this seqNr (at most the last one)")


class SubscribeQuery(_Wire):
    """`GET /events`: the accepted events of every journal after a position."""

    after: str = absent(
        min_length=1,
        max_length=100_000,
        description="a `position` this endpoint wrote: resume after it; or `end`: after "
        "every record the topic holds now, only what is appended from then on (default: "
        "from the start)",
    )
    tags: str = absent(
        max_length=100_000, description="comma-separated tags: only events with any of them"
    )
    live: Literal["true", "false"] = Field(
        default="false",
        description="true: stream forever, heartbeats while idle; false: end at the high "
        "watermarks as of the start",
    )
    prefix: StrictStr = Field(
        default="",
        max_length=100_000,
        description="only events of journals whose id starts with it (a token limited to a "
        "prefix: within it, its own by default)",
    )


class GroupEventsQuery(_Wire):
    """`GET /subscriptions/{group}/events`: a member's events."""

    tags: str = absent(
        max_length=100_000, description="comma-separated tags: only events with any of them"
    )


class AckRequest(_Wire):
    """`POST /subscriptions/{group}/ack`: the events a member of the group handled."""

    positions: list[str] = Field(
        min_length=1,
        max_length=MAX_ACK_POSITIONS,
        description="the `position`s of events the group's stream on this worker delivered",
    )


class SnapshotPath(_Wire):
    """The seqNr in `/journals/{id}/snapshots/{seqNr}`."""

    seqNr: QuerySeqNr = Field(description="the last seqNr the snapshot covers")


class LatestSnapshotQuery(_Wire):
    """`GET /journals/{id}/snapshots/latest`: the newest snapshot at or below `maxSeqNr`."""

    maxSeqNr: QuerySeqNr = Field(
        default=SEQ_NR_MAX, description="at or below this seqNr (and the journal's last)"
    )


class DeleteSnapshotsQuery(_Wire):
    """`DELETE /journals/{id}/snapshots`: remove the snapshots up to `to`."""

    to: QuerySeqNr = Field(description="remove the snapshots at or below this seqNr")


QueryLimit = Annotated[
    int,
    PlainValidator(_query_number),
    Field(ge=1, le=MAX_IDS_LIMIT),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_IDS_LIMIT}),
]


class IdsQuery(_Wire):
    """`GET /journals`: a page of journal ids, ascending, starting with `prefix`, above
    `after` (the previous page's `next`)."""

    prefix: StrictStr = Field(default="", description="only ids that start with it")
    after: StrictStr = absent(description="only ids above it: the previous page's `next`")
    limit: QueryLimit = Field(
        default=DEFAULT_IDS_LIMIT, description=f"at most this many ids (1..{MAX_IDS_LIMIT})"
    )


class QuarantineQuery(_Wire):
    """`GET /quarantine`: the newest records of the quarantine."""

    limit: Annotated[
        int,
        PlainValidator(_query_number),
        Field(ge=1, le=MAX_QUARANTINE_LIMIT),
        WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_QUARANTINE_LIMIT}),
    ] = Field(
        default=DEFAULT_QUARANTINE_LIMIT,
        description=f"at most this many records, the newest (1..{MAX_QUARANTINE_LIMIT})",
    )


class NoQuery(_Wire):
    """Routes without query parameters refuse any."""


# --- answers --------------------------------------------------------------------------------


class ErasedOut(_Wire):
    """An erasure's answer: where its Purge landed (absent when the journal was erased
    already)."""

    already: bool = Field(description="the journal was erased before this request")
    partition: int | None = Field(default=None, ge=0)
    offset: int | None = Field(default=None, ge=0)


class PositionOut(_Wire):
    """Where an action landed in Kafka."""

    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class SeqRangeOut(_Wire):
    """An inclusive range of seqNrs."""

    from_: SeqNr = Field(alias="from")
    to: SeqNr


class AppendedOut(_Wire):
    """An append's answer: where its record landed, and the seqNrs of its events."""

    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    seqNr: SeqRangeOut


class EventOut(_Wire):
    """One line of a read; at most one of the payload fields is present."""

    seqNr: SeqNr
    payload: PayloadValue = absent()
    payloadText: str = absent()
    payloadBinary: str = absent(json_schema_extra={"contentEncoding": "base64"})
    tags: list[str]
    timestamp: str = Field(json_schema_extra={"format": "date-time"})
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    metadata: JsonValue = absent(description="the append's metadata, if it had some")
    expireAfter: str = absent(json_schema_extra={"format": "duration"})
    headers: dict[str, str] = absent(description="when the append had some")


class SubscribedEventOut(EventOut):
    """One line of a subscription: an event as a read writes it, its journal's id, and the
    position to resume after it."""

    id: str
    position: str


class HeartbeatOut(_Wire):
    """A subscription's line while nothing is delivered, and its last line when it ends."""

    heartbeat: Literal[True]
    position: str


class GroupHeartbeatOut(_Wire):
    """A group member's line while nothing is delivered."""

    heartbeat: Literal[True]


class AckedOut(_Wire):
    """An acknowledgement's answer: how many of the positions the member had out (the rest
    were acknowledged already, or of partitions it no longer has)."""

    acknowledged: int = Field(ge=0)


class GroupPartitionOut(_Wire):
    """A partition of a subscription group's topic: past the topic's own, those of its grown
    successors (docs/growing.md)."""

    partition: int = Field(
        ge=0, description="its number in an event position (the topic's own, then each successor's)"
    )
    topic: str = Field(description="the Kafka topic holding it")
    topicPartition: int = Field(ge=0, description="its partition in that topic")
    checkpoint: int | None = Field(description="the committed offset (null: never committed)")
    end: int = Field(ge=0, description="the end of the partition's log")
    lag: int = Field(description="records between the checkpoint and the end")
    member: str | None = Field(description="the member that has it (null: nobody)")


class GroupOut(_Wire):
    """A subscription group: Kafka's state of it ("Stable", "Empty", ...) and its partitions."""

    name: str
    state: str
    partitions: list[GroupPartitionOut]


class GroupsOut(_Wire):
    """The topic's subscription groups, by name."""

    groups: list[GroupOut]


class JournalInfoOut(_Wire):
    """A journal's last seqNr and deleteTo; null when it has none."""

    id: str
    seqNr: SeqNr | None
    deleteTo: SeqNr | None


class DeletedOut(_Wire):
    """partition/offset are present when a Delete was written."""

    deleteTo: SeqNr | None
    partition: int = absent(ge=0)
    offset: int = absent(ge=0)


class SnapshotOut(_Wire):
    """A snapshot: exactly one of the payload fields is present."""

    seqNr: SeqNr
    payload: PayloadValue = absent()
    payloadText: str = absent()
    payloadBinary: str = absent(json_schema_extra={"contentEncoding": "base64"})
    timestamp: str = Field(json_schema_extra={"format": "date-time"}, description="when it was put")


class SnapshotStored(_Wire):
    """A stored snapshot: its seqNr and when it was put."""

    seqNr: SeqNr
    timestamp: str = Field(json_schema_extra={"format": "date-time"})


class JournalIdPageOut(_Wire):
    """A page of journal ids. `next`: pass it as `after` for the next page; null at the end.
    A page may be short, even empty, with `next` set (it examined purged journals)."""

    journals: list[str]
    next: str | None


class Status(_Wire):
    status: str


class PartitionStatusOut(_Wire):
    """A partition this worker owns, and how far its replication is behind."""

    partition: int
    lagRecords: int = Field(description="records not yet replicated to the store")
    lagSeconds: float = Field(description="age of the oldest of them (0 when none)")


class GroupWorkerOut(_Wire):
    """A worker of the group and the partitions it owns."""

    url: str = Field(description="its base URL (where requests for its partitions go)")
    partitions: list[int] = Field(description="ascending")


class WorkerStatusOut(_Wire):
    """What this worker knows of itself, from its own metrics: counters since it started;
    and of its group, as the group's last assignment told it."""

    version: str
    partitions: list[PartitionStatusOut] = Field(
        description="the partitions it owns (replicates), ascending"
    )
    workers: list[GroupWorkerOut] = Field(
        description="every worker of the group with its partitions, this one included, by "
        "URL; empty when not known (before the first assignment, or a server without a group)"
    )
    quarantinedRecords: int = Field(description="records replication sent to quarantine")
    requests: int = Field(description="HTTP requests answered")
    clientErrors: int = Field(description="of them, answered 4xx")
    serverErrors: int = Field(description="of them, answered 5xx or aborted")
    subscriptionsOpen: int = Field(
        description="subscriptions (GET /events, group members' streams) open now"
    )


class QuarantinedOut(_Wire):
    """A record replication set aside: where it is in the quarantine topic, where it was in
    the action topic, why, when, and whether it was replayed since."""

    partition: int = Field(description="of the quarantine topic")
    offset: int = Field(description="in the quarantine topic")
    originPartition: int | None = Field(description="its partition in the action topic")
    originOffset: str | None = Field(
        description="its offset there; `first-last` for an undecodable batch (lost)"
    )
    reason: str
    timestamp: str = Field(
        json_schema_extra={"format": "date-time"}, description="the record's own time"
    )
    key: str | None = Field(description="the journal id it was written under, if any")
    replayed: bool = Field(description="produced to the action topic again since")


class QuarantineOut(_Wire):
    """The newest records of the quarantine, newest first, and how many it holds."""

    records: list[QuarantinedOut]
    total: int = Field(
        description="records in the quarantine topic, replay markers included (counting only "
        "the quarantined ones would mean reading it all)"
    )


def to_json(answer: BaseModel) -> bytes:
    """An answer's JSON: the fields it was given, by their wire names (unset optionals omitted,
    so a present `"payload": null` keeps meaning the JSON value null)."""
    return answer.__pydantic_serializer__.to_json(answer, exclude_unset=True, by_alias=True)


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def wire_names(model: type[BaseModel]) -> Iterable[str]:
    return (field.alias or name for name, field in model.model_fields.items())
