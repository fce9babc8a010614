"""Request parsing: untrusted bytes and query strings in, the core's typed values out.

The schema is `web.schema`'s models; this module feeds them and turns their complaints into
`ApiError`s (400, with a code from `ErrorCode` and a message naming the offending field), and
raises nothing else, so bad input can never become a 500. Parsing is strict: unknown fields and
query parameters are refused (a misspelt `expire_after` must not be silently ignored), numbers
must be exact integers, strings must be valid Unicode.

A body is parsed with orjson, whose result is then trusted (valid UTF-8, finite numbers,
integers within 64 bits): nothing walks the payload again here. orjson silently turns integers
beyond 64 bits into floats, so a body with a run of 19 or more digits, or one orjson refuses, is
parsed again with the stdlib parser, which keeps integers exact and lets the checks name the
offending field.
An event's JSON `null` payload is no payload, as kafka-journal reads it.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote_to_bytes

import orjson
from multidict import MultiMapping
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from journal.client.conditional import check_idempotency_key
from journal.core.model import SEQ_NR_MAX, SEQ_NR_MIN, Event, InvalidValue, Payload, PayloadMetadata
from journal.kafka.subscription import SubscriptionPosition
from web import schema
from web.error_answers import ApiError, ErrorCode, bad_request

# A run of 19 digits may be a number orjson turns into a float (beyond 64 bits; -2^63 and
# 2^64-1 have 19 and 20 digits), or just digits in a string: either way the stdlib parser
# decides, exactly. Found by mapping every digit to 0 and searching (a regex takes 10x longer).
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * 19
_CODES = {code.value: code for code in ErrorCode}
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
    "list_type": "an array",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
}

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ParsedAppend:
    """A parsed append: consecutive events, their metadata and the record's user headers."""

    events: tuple[Event, ...]
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


def parse_json(body: bytes) -> tuple[object, bool]:
    """The body's JSON value, and whether it is trusted (see the module docstring).

    Strict: UTF-8 only (no UTF-16 guessing), no NaN/Infinity, no out-of-range floats.
    """
    # more brackets than MAX_DEPTH (strings' included: an overestimate) may nest too deeply
    shallow = body.count(b"[") + body.count(b"{") <= schema.MAX_DEPTH
    if shallow and _LONG_DIGITS not in body.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(body), True
        except orjson.JSONDecodeError:
            pass  # the stdlib parser says why, or parses what orjson refuses to (surrogates)
    return _parse_json_exactly(body), False


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


def parse_append(body: bytes) -> ParsedAppend:
    """Parse and check an append body (see `web.schema.AppendRequest`)."""
    value, trusted = parse_json(body)
    if not trusted:
        _check_values(value)
    request = validate(schema.AppendRequest, value)
    return ParsedAppend(
        events=request.core_events(),
        metadata=request.core_metadata(),
        headers=request.headers or {},
        expected_seq_nr=request.expectedSeqNr,
    )


def parse_snapshot(body: bytes) -> Payload:
    """Parse and check a snapshot body (see `web.schema.SnapshotIn`)."""
    value, trusted = parse_json(body)
    if not trusted:
        _check_values(value)
    return validate(schema.SnapshotIn, value).core_payload()


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
        raise _api_error(model, e.errors(include_url=False)) from None


def parse_read_query(query: MultiMapping[str]) -> ParsedRead:
    """`from` (default 1), `to` (default 2^63-1): seqNrs; `limit` (default none): >= 0."""
    parsed = validate(schema.ReadQuery, _only_params(query, schema.ReadQuery))
    return ParsedRead(parsed.from_, parsed.to, parsed.limit)


@dataclass(frozen=True, slots=True)
class ParsedSubscription:
    """Where a subscription starts (None: from the start), its tags (none: every event), and
    whether it goes on forever."""

    after: SubscriptionPosition | None = None
    tags: frozenset[str] = frozenset()
    live: bool = False


def parse_subscribe_query(query: MultiMapping[str]) -> ParsedSubscription:
    """`after` (a position this API wrote), `tags` (comma-separated), `live` (true|false)."""
    parsed = validate(schema.SubscribeQuery, _only_params(query, schema.SubscribeQuery))
    try:
        after = None if parsed.after is None else SubscriptionPosition.parse(parsed.after)
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_QUERY, f"after: {e}") from None
    tags = frozenset(t for t in (parsed.tags or "").split(",") if t)
    return ParsedSubscription(after, tags, parsed.live == "true")


def parse_ids_query(query: MultiMapping[str]) -> schema.IdsQuery:
    """`prefix` (default ""), `after` (default none), `limit` (default 100, at most 1000)."""
    return validate(schema.IdsQuery, _only_params(query, schema.IdsQuery))


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


# --- what orjson vouches for, checked when it did not parse the body ---------------------------


def _check_values(value: object) -> None:
    """Refuse what the codec would store differently or not at all: lone surrogates (which
    UTF-8, hence Kafka and Cassandra, cannot carry), integers beyond 64 bits, nesting deeper
    than MAX_DEPTH below a field. One iterative walk (no recursion); the offence is named by
    its place and gets the code of its field."""
    stack: list[tuple[object, tuple[int | str, ...]]] = [(value, ())]
    while stack:
        item, loc = stack.pop()
        if len(loc) > schema.MAX_DEPTH + _FIELD_DEPTH:
            field = loc[:_FIELD_DEPTH] if loc[0] == "events" else loc[:1]
            raise _refused(field, f"is nested deeper than {schema.MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, loc)
        elif isinstance(item, int) and not isinstance(item, bool):
            if not schema.INT_MIN <= item <= schema.INT_MAX:
                raise _refused(loc, f"holds the integer {item}, beyond 64 bits")
        elif isinstance(item, list):
            stack.extend((nested, (*loc, i)) for i, nested in enumerate(item))
        elif isinstance(item, dict):
            for key, nested in item.items():
                _check_text(key, (*loc, key, "[key]") if loc == ("headers",) else loc)
                stack.append((nested, (*loc, key)))


_FIELD_DEPTH = 3  # a payload's place: events, its index, payload


def _check_text(text: str, loc: tuple[int | str, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _refused(loc, "contains a lone UTF-16 surrogate") from None


def _refused(loc: tuple[int | str, ...], message: str) -> ApiError:
    return bad_request(_code_at(loc), f"{_where(loc, 'the body')} {message}")


# --- validation errors as the API's errors ----------------------------------------------------


def _api_error(model: type[BaseModel], errors: Sequence[ErrorDetails]) -> ApiError:
    query = not issubclass(model, (schema.AppendRequest, schema.SnapshotIn))
    first = errors[0]
    loc = first["loc"]
    if first["type"] == "extra_forbidden":
        where = _where(loc[:-1], "the body")
        unknown = [
            e["loc"][-1]
            for e in errors
            if e["type"] == "extra_forbidden" and e["loc"][:-1] == loc[:-1]
        ]
        known = ", ".join(sorted(schema.wire_names(_model_at(model, loc[:-1]))))
        return bad_request(
            ErrorCode.INVALID_BODY,
            f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; known: {known}",
        )
    code = _CODES.get(first["type"])
    if code is None:
        code = ErrorCode.INVALID_QUERY if query else _code_at(loc)
    return bad_request(code, f"{_where(loc, 'the body')} {_message(first)}")


def _code_at(loc: tuple[int | str, ...]) -> ErrorCode:
    for part in loc:
        code = _FIELD_CODES.get(str(part))
        if code is not None:
            return code
    return ErrorCode.INVALID_BODY


def _message(error: ErrorDetails) -> str:
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


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel]:
    """The model the fields at `loc` belong to (for the list of known fields)."""
    for part in loc:
        if isinstance(part, str):
            annotation = model.model_fields[part].annotation
            nested = [
                arg
                for arg in getattr(annotation, "__args__", ())
                if isinstance(arg, type) and issubclass(arg, BaseModel)
            ]
            model = nested[0] if nested else model
    return model


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value
