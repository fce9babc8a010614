"""Request parsing: untrusted bytes and query strings in, the core's typed values out.

Every function here raises `ApiError` (400, with a code from `ErrorCode` and a message naming
the offending field) and nothing else, so bad input can never become a 500. Parsing is strict:
unknown fields and query parameters are refused (a misspelt `expire_after` must not be silently
ignored), numbers must be exact integers, strings must be valid Unicode.

Append body (`POST /journals/{id}/events`):

    {"events": [{"seqNr": 1, "payload": <any JSON>, "tags": ["t"]}, ...],
     "metadata": <any JSON>?, "headers": {"name": "value"}?, "expireAfter": "P1D"?}

An event carries at most one of `payload` (any JSON; null is no payload, as kafka-journal reads
it), `payloadText` (a string) and `payloadBinary` (standard base64); with none it has no
payload. seqNrs are consecutive and in 1..2^63-1. JSON values are kept to what the journal's
codec can store unchanged: integers in the signed/unsigned 64-bit range, finite numbers,
nesting at most `MAX_DEPTH` levels.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import unquote_to_bytes

from multidict import MultiMapping

from journal.codec import ACTION_HEADER
from journal.model import (
    SEQ_NR_MAX,
    SEQ_NR_MIN,
    BinaryPayload,
    Event,
    InvalidValue,
    Json,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
)
from web.duration import iso_to_duration
from web.errors import ErrorCode, bad_request

# The codec writes payloads with orjson, which refuses nesting beyond 254 levels and integers
# outside [-2^63, 2^64-1]; an event adds a few levels around its payload.
MAX_DEPTH = 200
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1

_APPEND_FIELDS = frozenset({"events", "metadata", "headers", "expireAfter"})
_PAYLOAD_FIELDS = ("payload", "payloadText", "payloadBinary")
_EVENT_FIELDS = frozenset({"seqNr", "tags", *_PAYLOAD_FIELDS})
_ASCII_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """A parsed append: consecutive events, their metadata and the record's user headers."""

    events: tuple[Event, ...]
    metadata: PayloadMetadata = PayloadMetadata()
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReadQuery:
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


def parse_json(body: bytes) -> object:
    """Strict JSON: UTF-8 only (no UTF-16 guessing), no NaN/Infinity, no out-of-range floats."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad_request(ErrorCode.MALFORMED_JSON, f"the body is not UTF-8: {e}") from None
    try:
        # the stdlib parser, not orjson: orjson turns integers beyond 64 bits into floats,
        # which would store a different number than the client sent without a word
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise bad_request(ErrorCode.MALFORMED_JSON, "the body is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, a refused constant, a huge integer literal
        raise bad_request(ErrorCode.MALFORMED_JSON, f"the body is not valid JSON: {e}") from None


def parse_append(body: bytes) -> AppendRequest:
    """Parse and check an append body (see the module docstring)."""
    obj = _object(parse_json(body), "the body", ErrorCode.INVALID_BODY)
    _no_unknown_fields(obj, _APPEND_FIELDS, "the body")
    if obj.get("events") is None:
        raise bad_request(ErrorCode.INVALID_BODY, "the body needs an `events` array")
    raw_events = obj["events"]
    if not isinstance(raw_events, list):
        raise bad_request(
            ErrorCode.INVALID_BODY, f"`events` must be an array, got {_type_name(raw_events)}"
        )
    if not raw_events:
        raise bad_request(ErrorCode.INVALID_BODY, "`events` must hold at least one event")
    events = tuple(_event(raw, f"events[{i}]") for i, raw in enumerate(raw_events))
    _check_consecutive(events)
    metadata = obj.get("metadata")
    _check_value(metadata, "metadata", ErrorCode.INVALID_BODY)
    return AppendRequest(
        events=events,
        metadata=PayloadMetadata(
            expire_after=_expire_after(obj.get("expireAfter")), data=cast(Json, metadata)
        ),
        headers=_headers(obj.get("headers")),
    )


def parse_read_query(query: MultiMapping[str]) -> ReadQuery:
    """`from` (default 1), `to` (default 2^63-1): seqNrs; `limit` (default none): >= 0."""
    _only_params(query, ("from", "to", "limit"))
    from_ = _seq_nr_param(query, "from")
    to = _seq_nr_param(query, "to")
    limit = _int_param(query, "limit")
    return ReadQuery(
        from_=SEQ_NR_MIN if from_ is None else from_,
        to=SEQ_NR_MAX if to is None else to,
        limit=limit,
    )


def parse_delete_query(query: MultiMapping[str]) -> int:
    """The required `to` of a delete: a seqNr."""
    _only_params(query, ("to",))
    to = _seq_nr_param(query, "to")
    if to is None:
        raise bad_request(ErrorCode.INVALID_QUERY, "`to` is required: delete up to which seqNr?")
    return to


def check_no_params(query: MultiMapping[str]) -> None:
    _only_params(query, ())


# --- events ---------------------------------------------------------------------------------


def _event(raw: object, where: str) -> Event:
    obj = _object(raw, where, ErrorCode.INVALID_BODY)
    _no_unknown_fields(obj, _EVENT_FIELDS, where)
    if "seqNr" not in obj:
        raise bad_request(ErrorCode.INVALID_SEQ_NR, f"{where}.seqNr is missing")
    return Event(
        seq_nr=_seq_nr(obj["seqNr"], f"{where}.seqNr"),
        tags=_tags(obj.get("tags"), f"{where}.tags"),
        payload=_payload(obj, where),
    )


def _seq_nr(value: object, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        # only a literal beyond 64 bits or with a fraction/exponent parses to a float
        raise bad_request(
            ErrorCode.INVALID_SEQ_NR,
            f"{where} must be a plain integer in {SEQ_NR_MIN}..{SEQ_NR_MAX}, got {value!r}",
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(
            ErrorCode.INVALID_SEQ_NR, f"{where} must be an integer, got {_type_name(value)}"
        )
    if not SEQ_NR_MIN <= value <= SEQ_NR_MAX:
        raise bad_request(
            ErrorCode.INVALID_SEQ_NR, f"{where} must be in {SEQ_NR_MIN}..{SEQ_NR_MAX}, got {value}"
        )
    return value


def _check_consecutive(events: Sequence[Event]) -> None:
    for i in range(1, len(events)):
        previous, current = events[i - 1].seq_nr, events[i].seq_nr
        if current != previous + 1:
            raise bad_request(
                ErrorCode.INVALID_SEQ_NR,
                f"seqNrs in one append must be consecutive: events[{i}].seqNr is {current}, "
                f"expected {previous + 1}" + (" (beyond 2^63-1)" if previous == SEQ_NR_MAX else ""),
            )


def _tags(value: object, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise bad_request(
            ErrorCode.INVALID_BODY, f"{where} must be an array of strings, got {_type_name(value)}"
        )
    tags: set[str] = set()
    for i, tag in enumerate(value):
        if not isinstance(tag, str):
            raise bad_request(
                ErrorCode.INVALID_BODY, f"{where}[{i}] must be a string, got {_type_name(tag)}"
            )
        tags.add(_check_text(tag, ErrorCode.INVALID_BODY, f"{where}[{i}]"))
    return frozenset(tags)


def _payload(obj: dict[str, object], where: str) -> Payload | None:
    given = [name for name in _PAYLOAD_FIELDS if name in obj]
    if len(given) > 1:
        raise bad_request(
            ErrorCode.INVALID_PAYLOAD,
            f"{where} has {' and '.join(given)}: an event carries at most one payload",
        )
    if not given:
        return None
    name, value = given[0], obj[given[0]]
    if name == "payload":
        _check_value(value, f"{where}.payload", ErrorCode.INVALID_PAYLOAD)
        return JsonPayload(cast(Json, value))
    if not isinstance(value, str):
        raise bad_request(
            ErrorCode.INVALID_PAYLOAD,
            f"{where}.{name} must be a string, got {_type_name(value)}",
        )
    if name == "payloadText":
        return TextPayload(_check_text(value, ErrorCode.INVALID_PAYLOAD, f"{where}.payloadText"))
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        raise bad_request(
            ErrorCode.INVALID_PAYLOAD, f"{where}.payloadBinary is not standard base64: {e}"
        ) from None
    # b64decode tolerates surplus padding and stray low bits; only the canonical form is
    # accepted, so a client's encoding bug cannot pass as a slightly different payload
    if base64.b64encode(raw).decode("ascii") != value:
        raise bad_request(
            ErrorCode.INVALID_PAYLOAD,
            f"{where}.payloadBinary is not canonical base64 (padding or trailing bits)",
        )
    return BinaryPayload(raw)


# --- metadata and headers -------------------------------------------------------------------


def _expire_after(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request(
            ErrorCode.INVALID_EXPIRE_AFTER,
            f"expireAfter must be an ISO 8601 duration string, got {_type_name(value)}",
        )
    try:
        return str(iso_to_duration(value))
    except InvalidValue as e:
        raise bad_request(ErrorCode.INVALID_EXPIRE_AFTER, f"expireAfter: {e}") from None


def _headers(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(
            ErrorCode.INVALID_HEADERS,
            f"headers must be an object of strings, got {_type_name(value)}",
        )
    headers: dict[str, str] = {}
    for name, header_value in cast(dict[str, object], value).items():
        where = f"headers[{name!r}]"
        if not name:
            raise bad_request(ErrorCode.INVALID_HEADERS, "a header name must not be empty")
        if name == ACTION_HEADER:
            raise bad_request(
                ErrorCode.INVALID_HEADERS, f"the header name {ACTION_HEADER!r} is the journal's own"
            )
        if not isinstance(header_value, str):
            raise bad_request(
                ErrorCode.INVALID_HEADERS,
                f"{where} must be a string, got {_type_name(header_value)}",
            )
        _check_text(name, ErrorCode.INVALID_HEADERS, "a header name")
        headers[name] = _check_text(header_value, ErrorCode.INVALID_HEADERS, where)
    return headers


# --- query parameters -----------------------------------------------------------------------


def _only_params(query: MultiMapping[str], allowed: Sequence[str]) -> None:
    for name in query:
        if name not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise bad_request(
                ErrorCode.INVALID_QUERY, f"unknown query parameter {name!r} (expected: {expected})"
            )
        if len(query.getall(name)) > 1:
            raise bad_request(ErrorCode.INVALID_QUERY, f"query parameter {name!r} is repeated")


def _int_param(query: MultiMapping[str], name: str) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    # ASCII digits only: int() would also take "+1", " 1", "1_000" and other scripts' digits
    if not text or not set(text) <= _ASCII_DIGITS or len(text) > 19:
        raise bad_request(
            ErrorCode.INVALID_QUERY,
            f"{name} must be a non-negative integer below 2^63, got {text!r}",
        )
    value = int(text)
    if value > SEQ_NR_MAX:
        raise bad_request(ErrorCode.INVALID_QUERY, f"{name} must be below 2^63, got {text}")
    return value


def _seq_nr_param(query: MultiMapping[str], name: str) -> int | None:
    value = _int_param(query, name)
    if value is not None and value < SEQ_NR_MIN:
        raise bad_request(ErrorCode.INVALID_QUERY, f"{name} is a seqNr, so at least 1; got 0")
    return value


# --- JSON values ----------------------------------------------------------------------------


def _check_value(value: object, where: str, code: ErrorCode) -> None:
    """Refuse what the codec would store differently or not at all (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise bad_request(code, f"{where} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, bool) or item is None or isinstance(item, float):
            continue  # floats are finite: parse_json refused the others
        if isinstance(item, int):
            if not _INT_MIN <= item <= _INT_MAX:
                raise bad_request(code, f"{where} holds the integer {item}, beyond 64 bits")
        elif isinstance(item, str):
            _check_text(item, code, where)
        elif isinstance(item, list):
            stack.extend((nested, depth + 1) for nested in item)
        elif isinstance(item, dict):
            for key, nested in cast(dict[str, object], item).items():
                _check_text(key, code, where)
                stack.append((nested, depth + 1))


def _check_text(text: str, code: ErrorCode, where: str) -> str:
    # JSON's \ud800 escapes give lone surrogates, which UTF-8 (Kafka, Cassandra) cannot carry
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_request(code, f"{where} contains a lone UTF-16 surrogate") from None
    return text


def _object(value: object, where: str, code: ErrorCode) -> dict[str, object]:
    if not isinstance(value, dict):
        raise bad_request(code, f"{where} must be a JSON object, got {_type_name(value)}")
    return cast(dict[str, object], value)


def _no_unknown_fields(obj: dict[str, object], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        raise bad_request(
            ErrorCode.INVALID_BODY,
            f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(known))}",
        )


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value
