"""Request parsing: untrusted bytes and query strings in, the core's typed values out.

Every refusal is an `ApiError` (400, with a code from `ErrorCode` and a message naming the
offending field), and nothing else is raised, so bad input can never become a 500. Parsing is
strict: unknown fields and query parameters are refused (a misspelt `expire_after` must not be
silently ignored), numbers must be exact integers, strings must be valid Unicode.

A body is decoded in one msgspec pass into the structs below, which state its shape (the
OpenAPI document describes the same shape from `web.schema`'s models): a JSON payload is only
delimited and kept as its text, which the record value, the store and a read's answer carry
as it is (integers beyond 64 bits included). When msgspec refuses a body, or a glance finds
what it does not check (see `_decode`), the stdlib parser reads the body again, exactly, and
names the fault. Query strings go through `web.schema`'s pydantic models.
An event's JSON `null` payload is no payload, as kafka-journal reads it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, cast
from urllib.parse import unquote_to_bytes

import msgspec
from multidict import MultiDict, MultiMapping
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from journal import (
    SEQ_NR_MAX,
    Ack,
    BinaryPayload,
    Event,
    InvalidValue,
    JsonPayload,
    NewEvent,
    Payload,
    PayloadMetadata,
    SubscriptionPosition,
    TextPayload,
)
from journal.client import check_idempotency_key
from journal.core import SEQ_NR_MIN, Json, json_payload
from journal.subscriptions import EventPosition, group_id
from web import schema
from web.duration import iso_to_duration
from web.error_answers import ApiError, ErrorCode, bad_request
from web.schema import INT_MAX, INT_MIN, MAX_ACK_POSITIONS, MAX_DEPTH

# the code of an error, by the first field of its location that has one of its own
_FIELD_CODES = {
    "seqNr": ErrorCode.INVALID_SEQ_NR,
    "payload": ErrorCode.INVALID_PAYLOAD,
    "payloadText": ErrorCode.INVALID_PAYLOAD,
    "payloadBinary": ErrorCode.INVALID_PAYLOAD,
    "expireAfter": ErrorCode.INVALID_EXPIRE_AFTER,
    "headers": ErrorCode.INVALID_HEADERS,
    "expectedSeqNr": ErrorCode.INVALID_SEQ_NR,
}
_EXPECTED = {
    "int_type": "an integer",
    "string_type": "a string",
}

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ParsedAppend:
    """A parsed append: consecutive events (or events without seqNrs, to append at the
    journal's end), their metadata and the record's user headers."""

    events: tuple[Event, ...] | tuple[NewEvent, ...]
    metadata: PayloadMetadata = PayloadMetadata()
    headers: dict[str, str] = field(default_factory=dict)
    expected_seq_nr: int | None = None


@dataclass(frozen=True, slots=True)
class ParsedRead:
    """`from`, `to` (inclusive seqNrs) and `limit` (None: no limit) of a read."""

    from_: int = SEQ_NR_MIN
    to: int = SEQ_NR_MAX
    limit: int | None = None


def parse_journal_id(raw_segment: str) -> str:
    """The journal id from its raw, percent-encoded path segment.

    Decoded here, strictly, rather than taken from the router: yarl leaves escapes that are
    not UTF-8 (`%ff`) undecoded, which would make `/journals/%ff` and `/journals/%25ff` the
    same journal. The id becomes a Kafka key and a Cassandra key, so it must be UTF-8.
    """
    try:
        journal_id = unquote_to_bytes(raw_segment).decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request(
            ErrorCode.INVALID_JOURNAL_ID,
            f"the journal id {raw_segment!r} is not UTF-8 once percent-decoded",
        ) from None
    if not journal_id:
        raise bad_request(ErrorCode.INVALID_JOURNAL_ID, "the journal id must not be empty")
    return journal_id


# --- bodies: one msgspec pass; the stdlib parser only explains a refusal ---------------------


class _EventBody(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An event of an append body (see `web.schema.EventIn`); `payload` is its JSON text as
    sent, only delimited (empty: absent)."""

    seqNr: Annotated[int, msgspec.Meta(ge=SEQ_NR_MIN, le=SEQ_NR_MAX)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    payload: msgspec.Raw = msgspec.Raw()
    payloadText: str | msgspec.UnsetType = msgspec.UNSET
    payloadBinary: str | msgspec.UnsetType = msgspec.UNSET
    tags: frozenset[str] | None = None


class _AppendBody(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An append body (see `web.schema.AppendRequest`)."""

    events: Annotated[list[_EventBody], msgspec.Meta(min_length=1)]
    metadata: msgspec.Raw = msgspec.Raw()
    headers: dict[str, str] | None = None
    expireAfter: str | None = None
    expectedSeqNr: Annotated[int, msgspec.Meta(ge=0, le=SEQ_NR_MAX - 1)] | None = None


class _SnapshotBody(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A snapshot body (see `web.schema.SnapshotIn`)."""

    payload: msgspec.Raw = msgspec.Raw()
    payloadText: str | msgspec.UnsetType = msgspec.UNSET
    payloadBinary: str | msgspec.UnsetType = msgspec.UNSET


_Body = TypeVar("_Body", _AppendBody, _SnapshotBody)
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {
    body: msgspec.json.Decoder(body) for body in (_AppendBody, _SnapshotBody)
}
_NO_TAGS: frozenset[str] = frozenset()
# a number the payload's text may hold but no float can: 1e999, or 309 digits and a fraction
_OUT_OF_RANGE = re.compile(rb"[eE][-+]?[0-9]{3}|[0-9]{309}")


def parse_append(body: bytes) -> ParsedAppend:
    """Parse and check an append body (see `web.schema.AppendRequest`). The seqNrs are each
    in range here; that they follow each other is the core's `check_consecutive`'s to say, at
    the append. Events without seqNrs (all of them, or it is a 400) are to append at the end."""
    request = _decode(_AppendBody, body)
    numbered = [raw.seqNr is not msgspec.UNSET for raw in request.events]
    if all(numbered):
        events: tuple[Event, ...] | tuple[NewEvent, ...] = tuple(
            [_event(raw, i) for i, raw in enumerate(request.events)]
        )
    elif not any(numbered):
        events = tuple([_new_event(raw, i) for i, raw in enumerate(request.events)])
    else:
        missing = numbered.index(False) if numbered[0] else numbered.index(True)
        raise bad_request(
            ErrorCode.INVALID_SEQ_NR,
            f"events[{missing}] {'has no' if numbered[0] else 'has a'} seqNr and events[0] "
            f"{'has one' if numbered[0] else 'has none'}: every event of a body has a seqNr, or "
            "none has (then they are appended at the journal's end)",
        )
    metadata = request.metadata
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH:  # one of them may nest too deeply
        texts = [e.payload.raw for e in events if type(e.payload) is JsonPayload]
        _check_depths(body, [*texts, bytes(metadata)])
    headers = request.headers or {}
    for name in headers:
        _check_header_name(name)
    expected = request.expectedSeqNr
    first = events[0].seq_nr if isinstance(events[0], Event) else None
    if expected is not None and first is not None and expected != first - 1:
        raise bad_request(
            ErrorCode.INVALID_SEQ_NR,
            f"the body expectedSeqNr {expected} cannot be met by events from seqNr {first}: "
            f"it must be {first - 1}",
        )
    return ParsedAppend(
        events=events,
        metadata=PayloadMetadata(
            expire_after=None
            if request.expireAfter is None
            else _expire_after(request.expireAfter),
            data=None if not metadata else _metadata(bytes(metadata)),
        ),
        headers=headers,
        expected_seq_nr=expected,
    )


def parse_snapshot(body: bytes) -> Payload:
    """Parse and check a snapshot body (see `web.schema.SnapshotIn`): exactly one payload, a
    JSON null included."""
    request = _decode(_SnapshotBody, body)
    given = _payloads_given(request)
    if len(given) != 1:
        raise bad_request(
            ErrorCode.INVALID_PAYLOAD,
            f"the body has {' and '.join(given) or 'none of payload, payloadText, payloadBinary'}"
            ": a snapshot carries exactly one payload",
        )
    if request.payload:
        text = bytes(request.payload)
        if text.count(b"[") + text.count(b"{") > MAX_DEPTH:
            _check_depths(body, [text])
        return JsonPayload(text)
    if request.payloadText is not msgspec.UNSET:
        return TextPayload(request.payloadText)
    assert request.payloadBinary is not msgspec.UNSET  # given: one of the three
    return BinaryPayload(_base64(request.payloadBinary, ("payloadBinary",)))


def _decode(kind: type[_Body], body: bytes) -> _Body:
    """The body as `kind`, in one pass: msgspec checks the syntax, the envelope's types and
    ranges, and only delimits the payloads. What it does not check of them: UTF-8 (for a body
    that is not ASCII) and numbers no float can hold (for a body that may have one, by a glance
    at its text; then the exact parse decides)."""
    try:
        decoded: _Body = _DECODERS[kind].decode(body)
    except (msgspec.DecodeError, RecursionError) as e:  # a ValidationError is a DecodeError
        raise _explain(kind, body, e) from None
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise bad_request(ErrorCode.MALFORMED_JSON, f"the body is not UTF-8: {e}") from None
    if _OUT_OF_RANGE.search(body) is not None:
        _check_exactly(body)
    return decoded


def _event(raw: _EventBody, index: int) -> Event:
    assert raw.seqNr is not msgspec.UNSET  # the body's events all have one
    tags = raw.tags or _NO_TAGS
    if raw.payloadText is msgspec.UNSET and raw.payloadBinary is msgspec.UNSET:  # the hot path
        return Event(raw.seqNr, tags, json_payload(bytes(raw.payload)) if raw.payload else None)
    return Event(raw.seqNr, tags, _event_payload(raw, index))


def _new_event(raw: _EventBody, index: int) -> NewEvent:
    return NewEvent(raw.tags or _NO_TAGS, _event_payload(raw, index))


def _event_payload(raw: _EventBody, index: int) -> Payload | None:
    text, binary = raw.payloadText, raw.payloadBinary
    if text is msgspec.UNSET and binary is msgspec.UNSET:  # JSON or no payload
        return json_payload(bytes(raw.payload)) if raw.payload else None
    given = _payloads_given(raw)
    if len(given) > 1:
        raise bad_request(
            ErrorCode.INVALID_PAYLOAD,
            f"events[{index}] has {' and '.join(given)}: an event carries at most one payload",
        )
    if text is not msgspec.UNSET:
        return TextPayload(text)
    assert binary is not msgspec.UNSET
    return BinaryPayload(_base64(binary, ("events", index, "payloadBinary")))


def _payloads_given(body: _EventBody | _SnapshotBody) -> list[str]:
    given = (
        bool(body.payload),
        body.payloadText is not msgspec.UNSET,
        body.payloadBinary is not msgspec.UNSET,
    )
    return [name for name, is_given in zip(schema.PAYLOAD_FIELDS, given, strict=True) if is_given]


def _base64(text: str, loc: tuple[int | str, ...]) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise _refused(loc, f"is not standard base64: {e}") from None
    # only the canonical form: a client's encoding bug must not pass as a different payload
    if base64.b64encode(raw).decode("ascii") != text:
        raise _refused(loc, "is not canonical base64 (padding or trailing bits)")
    return raw


def _expire_after(text: str) -> str:
    try:
        return str(iso_to_duration(text))
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_EXPIRE_AFTER, f"expireAfter {e}") from None


def _check_header_name(name: str) -> None:
    if not name:
        raise bad_request(ErrorCode.INVALID_HEADERS, "the header name '' must not be empty")
    if name in schema.RESERVED_HEADERS:
        raise bad_request(
            ErrorCode.INVALID_HEADERS, f"the header name {name!r} is the journal's own"
        )


def _metadata(text: bytes) -> Json:
    """The append's metadata as a value: stored as the codec writes it, so held to the codec's
    rules (64-bit integers, bounded nesting)."""
    value = cast(Json, msgspec.json.decode(text))
    _check_values(value, ("metadata",))
    return value


def _check_depths(body: bytes, texts: Iterable[bytes]) -> None:
    """The exact check of the body if one of these texts has more brackets than MAX_DEPTH
    (strings' included: an overestimate of its nesting)."""
    if any(text.count(b"[") + text.count(b"{") > MAX_DEPTH for text in texts):
        _check_exactly(body)


def _check_exactly(body: bytes) -> object:
    """The body parsed by the stdlib parser, which keeps integers exact and names what it
    refuses, then walked (`_check_values`); ApiError for the first fault."""
    value = _parse_json_exactly(body)
    _check_values(value, ())
    return value


def _parse_json_exactly(body: bytes) -> object:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad_request(ErrorCode.MALFORMED_JSON, f"the body is not UTF-8: {e}") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise bad_request(ErrorCode.MALFORMED_JSON, "the body is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, a refused constant, a huge integer literal
        raise bad_request(ErrorCode.MALFORMED_JSON, f"the body is not valid JSON: {e}") from None


def _explain(kind: type[Any], body: bytes, error: Exception) -> ApiError:
    """The answer to a body msgspec refused: the exact parse and walk name a fault of the JSON
    or of a value; else msgspec's complaint of the shape, with the field as the client wrote
    it and the code of that field."""
    value = _check_exactly(body)
    if not isinstance(error, msgspec.ValidationError):
        return bad_request(ErrorCode.MALFORMED_JSON, f"the body is not valid JSON: {error}")
    found = _COMPLAINT.fullmatch(str(error))
    assert found is not None  # the pattern takes any text
    detail, loc = found["detail"], _loc(found["path"] or "", value)
    unknown = _UNKNOWN_FIELD.fullmatch(detail)
    if unknown is not None:
        fields = (_EventBody if loc and isinstance(loc[-1], int) else kind).__struct_fields__
        return bad_request(
            ErrorCode.INVALID_BODY,
            f"{_where(loc, 'the body')} has unknown field(s) {unknown[1]!r}; "
            f"known: {', '.join(sorted(fields))}",
        )
    missing = _MISSING_FIELD.fullmatch(detail)
    if missing is not None:
        loc, message = (*loc, missing[1]), "is missing"
    else:
        message = _message(detail)
    return bad_request(_code_at(loc), f"{_where(loc, 'the body')} {message}")


# msgspec's ValidationError: "<detail>" or "<detail> - at `$<path>`"
_COMPLAINT = re.compile(r"(?P<detail>.*?)(?: - at `\$(?P<path>.*)`)?", re.DOTALL)
_PATH_PART = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(.*)`")
_MISSING_FIELD = re.compile(r"Object missing required field `(.*)`")
_EXPECTED_TYPE = re.compile(r"Expected `([^`]*)`, got `([^`]*)`")
_BOUND = re.compile(r"Expected `\w+` (>=|<=) (-?\d+)")
_TYPE_NAMES = {
    "int": "an integer",
    "str": "a string",
    "array": "an array",
    "object": "a JSON object",
    "null": "null",
    "bool": "a boolean",
    "float": "a number",
}
_GOT = {"int": "number", "float": "number", "str": "string", "bool": "boolean"}


def _loc(path: str, value: object) -> tuple[int | str, ...]:
    """msgspec's path as a location; a map's key (msgspec writes `[...]`) found in `value`,
    the first whose value is not a string (the only rule of a map's values here)."""
    loc: list[int | str] = []
    for part in _PATH_PART.finditer(path):
        name, index = part[1], part[2]
        if name is not None:
            loc.append(name)
        elif index is not None:
            loc.append(int(index))
        else:
            mapping = value
            for step in loc:
                mapping = mapping[step]  # type: ignore[index]
            assert isinstance(mapping, dict)
            loc.append(next(k for k, v in mapping.items() if not isinstance(v, str)))
    return tuple(loc)


def _message(detail: str) -> str:
    expected = _EXPECTED_TYPE.fullmatch(detail)
    if expected is not None:
        wanted = " or ".join(_TYPE_NAMES.get(t, t) for t in expected[1].split(" | "))
        return f"must be {wanted}, got {_GOT.get(expected[2], expected[2])}"
    bound = _BOUND.fullmatch(detail)
    if bound is not None:
        return f"must be {'at least' if bound[1] == '>=' else 'at most'} {bound[2]}"
    if detail == "Expected `array` of length >= 1":
        return "must not be empty"
    return detail


def parse_snapshot_seq_nr(raw: str) -> int:
    """The seqNr segment of `/journals/{id}/snapshots/{seqNr}`."""
    try:
        return validate(schema.SnapshotPath, {"seqNr": raw}).seqNr
    except ApiError as e:
        raise bad_request(ErrorCode.INVALID_SEQ_NR, f"the path's {e.message}") from None


def parse_latest_snapshot_query(query: MultiMapping[str]) -> int:
    """The `maxSeqNr` of a latest snapshot's read (default 2^63-1)."""
    params = _only_params(query, schema.LatestSnapshotQuery)
    return validate(schema.LatestSnapshotQuery, params).maxSeqNr


def parse_delete_snapshots_query(query: MultiMapping[str]) -> int:
    """The required `to` of a delete of snapshots."""
    return validate(
        schema.DeleteSnapshotsQuery, _only_params(query, schema.DeleteSnapshotsQuery)
    ).to


IDEMPOTENCY_KEY = "Idempotency-Key"


def parse_idempotency_key(headers: MultiMapping[str]) -> str | None:
    """The request's `Idempotency-Key` header, if any (at most one)."""
    keys = headers.getall(IDEMPOTENCY_KEY, [])
    if not keys:
        return None
    try:
        if len(keys) > 1:
            raise InvalidValue("given more than once")
        return check_idempotency_key(keys[0])
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_IDEMPOTENCY_KEY, f"{IDEMPOTENCY_KEY}: {e}") from None


def validate(model: type[Model], value: object) -> Model:
    """`value` as `model`, or ApiError 400 for the first thing wrong with it."""
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise _api_error(e.errors(include_url=False)) from None


def parse_append_query(query: MultiMapping[str]) -> Ack:
    """`ack` (default verified): when an append is answered."""
    # each query validated once (the model's ~5 us a request): there are few valid ones
    return _ack_of(tuple(query.items()))


@functools.lru_cache(maxsize=16)  # a refused query raises, so is never kept
def _ack_of(items: tuple[tuple[str, str], ...]) -> Ack:
    query = MultiDict(items)
    return Ack(validate(schema.AppendQuery, _only_params(query, schema.AppendQuery)).ack)


def parse_read_query(query: MultiMapping[str]) -> ParsedRead:
    """`from` (default 1), `to` (default 2^63-1): seqNrs; `limit` (default none): >= 0."""
    parsed = validate(schema.ReadQuery, _only_params(query, schema.ReadQuery))
    return ParsedRead(parsed.from_, parsed.to, parsed.limit)


@dataclass(frozen=True, slots=True)
class ParsedSubscription:
    """Where a subscription starts (None: from the start; `from_end`: after what the topic
    holds when it starts), its tags (none: every event), whether it goes on forever, and the
    prefix of the journal ids it follows ("": all)."""

    after: SubscriptionPosition | None = None
    from_end: bool = False
    tags: frozenset[str] = frozenset()
    live: bool = False
    prefix: str = ""


def parse_subscribe_query(
    query: MultiMapping[str], last_event_id: str | None = None
) -> ParsedSubscription:
    """`after` (a position this API wrote, or `end`), `tags` (comma-separated), `live`
    (true|false), `prefix`; `last_event_id` (the `Last-Event-ID` header, a position too) wins
    over `after`: an SSE client reconnects to the same URL with it, further on than the URL's
    `after`."""
    parsed = validate(schema.SubscribeQuery, _only_params(query, schema.SubscribeQuery))
    tags = frozenset(t for t in (parsed.tags or "").split(",") if t)
    live = parsed.live == "true"
    if last_event_id:
        source, position = "Last-Event-ID", last_event_id
    elif parsed.after == AFTER_END:
        return ParsedSubscription(None, True, tags, live, parsed.prefix)
    else:
        source, position = "after", parsed.after
    try:
        after = None if position is None else SubscriptionPosition.parse(position)
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_QUERY, f"{source}: {e}") from None
    return ParsedSubscription(after, False, tags, live, parsed.prefix)


AFTER_END = "end"  # `GET /events?after=end`: from now on (`kafka-journal subscribe --after end`)


def parse_group_name(raw: str) -> str:
    """The `{group}` segment of `/subscriptions/{group}/...`: a subscription group name."""
    try:
        group_id(raw)
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_GROUP, str(e)) from None
    return raw


def parse_group_events_query(query: MultiMapping[str]) -> frozenset[str]:
    """The `tags` (comma-separated) of a group member's stream."""
    parsed = validate(schema.GroupEventsQuery, _only_params(query, schema.GroupEventsQuery))
    return frozenset(t for t in (parsed.tags or "").split(",") if t)


class _AckBody(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An acknowledgement's body (see `web.schema.AckRequest`)."""

    positions: Annotated[list[str], msgspec.Meta(min_length=1, max_length=MAX_ACK_POSITIONS)]


_ACK_DECODER = msgspec.json.Decoder(_AckBody)


def parse_ack(body: bytes) -> tuple[EventPosition, ...]:
    """The event positions of an acknowledgement's body."""
    try:
        request = _ACK_DECODER.decode(body)
    except msgspec.ValidationError as e:
        raise bad_request(ErrorCode.INVALID_BODY, f"the body: {e}") from None
    except msgspec.DecodeError as e:
        raise bad_request(ErrorCode.MALFORMED_JSON, f"the body is not JSON: {e}") from None
    try:
        return tuple([EventPosition.parse(p) for p in request.positions])
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_BODY, f"positions: {e}") from None


def parse_ids_query(query: MultiMapping[str]) -> schema.IdsQuery:
    """`prefix` (default ""), `after` (default none), `limit` (default 100, at most 1000)."""
    return validate(schema.IdsQuery, _only_params(query, schema.IdsQuery))


def parse_quarantine_limit(query: MultiMapping[str]) -> int:
    """`limit` of `GET /quarantine` (default 100, at most 1000)."""
    return validate(schema.QuarantineQuery, _only_params(query, schema.QuarantineQuery)).limit


def parse_delete_query(query: MultiMapping[str]) -> int:
    """The required `to` of a delete: a seqNr."""
    return validate(schema.DeleteQuery, _only_params(query, schema.DeleteQuery)).to


def check_no_params(query: MultiMapping[str]) -> None:
    _only_params(query, schema.NoQuery)


def _only_params(query: MultiMapping[str], model: type[BaseModel]) -> dict[str, str]:
    allowed = _param_names(model)
    for name in query:
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise bad_request(
                ErrorCode.INVALID_QUERY, f"unknown query parameter {name!r} (expected: {expected})"
            )
        if len(query.getall(name)) > 1:
            raise bad_request(ErrorCode.INVALID_QUERY, f"query parameter {name!r} is repeated")
    return dict(query)


@functools.cache
def _param_names(model: type[BaseModel]) -> tuple[str, ...]:
    # cached: asked on every request, and pydantic's `model_fields` is not free (~2 us)
    return tuple(schema.wire_names(model))


# --- what the exact parse checks -------------------------------------------------------------


def _check_values(value: object, root: tuple[int | str, ...]) -> None:
    """Refuse what the codec would store differently or not at all: lone surrogates (which
    UTF-8, hence Kafka and Cassandra, cannot carry), integers beyond 64 bits outside a payload
    (a payload is kept as its text, the others are values), nesting deeper than MAX_DEPTH
    below a field. One iterative walk (no recursion); the offence is named by its place and
    gets the code of its field."""
    stack: list[tuple[object, tuple[int | str, ...]]] = [(value, root)]
    while stack:
        item, loc = stack.pop()
        if len(loc) > MAX_DEPTH + _FIELD_DEPTH:
            field = loc[:_FIELD_DEPTH] if loc[0] == "events" else loc[:1]
            raise _refused(field, f"is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, loc)
        elif isinstance(item, int) and not isinstance(item, bool):
            if not INT_MIN <= item <= INT_MAX and not _in_payload(loc):
                raise _refused(loc, f"holds the integer {item}, beyond 64 bits")
        elif isinstance(item, list):
            stack.extend((nested, (*loc, i)) for i, nested in enumerate(item))
        elif isinstance(item, dict):
            for key, nested in item.items():
                _check_text(key, (*loc, key, "[key]") if loc == ("headers",) else loc)
                stack.append((nested, (*loc, key)))


_FIELD_DEPTH = 3  # a payload's place: events, its index, payload


def _in_payload(loc: tuple[int | str, ...]) -> bool:
    return loc[:1] == ("payload",) or (loc[:1] == ("events",) and loc[2:3] == ("payload",))


def _check_text(text: str, loc: tuple[int | str, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _refused(loc, "contains a lone UTF-16 surrogate") from None


def _refused(loc: tuple[int | str, ...], message: str) -> ApiError:
    return bad_request(_code_at(loc), f"{_where(loc, 'the body')} {message}")


# --- validation errors as the API's errors ----------------------------------------------------


def _api_error(errors: Sequence[ErrorDetails]) -> ApiError:
    first = errors[0]
    return bad_request(
        ErrorCode.INVALID_QUERY, f"{_where(first['loc'], 'the query')} {_pydantic_message(first)}"
    )


def _code_at(loc: tuple[int | str, ...]) -> ErrorCode:
    for part in loc:
        code = _FIELD_CODES.get(str(part))
        if code is not None:
            return code
    return ErrorCode.INVALID_BODY


def _pydantic_message(error: ErrorDetails) -> str:
    kind, value = error["type"], error["input"]
    context: Mapping[str, Any] = error.get("ctx", {})
    if kind == "missing":
        return "is missing"
    if kind in _EXPECTED:
        shown = f" {value!r}" if isinstance(value, float) else ""
        return f"must be {_EXPECTED[kind]}, got {schema.json_type(value)}{shown}"
    if kind == "too_short":
        return "must not be empty"
    if kind == "greater_than_equal":
        return f"must be at least {context['ge']}, got {value}"
    if kind == "less_than_equal":
        return f"must be at most {context['le']}, got {value}"
    return error["msg"]  # our own refusals: written for this place


def _where(loc: tuple[int | str, ...], root: str) -> str:
    """A location as the client wrote it: events[0].seqNr, headers['h']."""
    text = ""
    in_map = False
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":
            return f"the header name {loc[-2]!r}"
        elif in_map:
            text += f"[{part!r}]"
        else:
            text += f".{part}" if text else part
            in_map = part == "headers"
    return text or root


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value
