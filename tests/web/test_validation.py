"""Request parsing without servers: every bad input is a 400 ApiError with the right code."""

from __future__ import annotations

import base64
import json

import pytest
from multidict import MultiDict, MultiDictProxy

from journal.core.model import (
    SEQ_NR_MAX,
    Ack,
    BinaryPayload,
    Event,
    JsonPayload,
    NewEvent,
    PayloadMetadata,
    TextPayload,
)
from web.duration import duration_to_iso, expire_after_to_iso, iso_to_duration
from web.error_answers import ApiError, ErrorCode
from web.schema import MAX_DEPTH
from web.validation import (
    ParsedAppend,
    ParsedRead,
    parse_append,
    parse_append_query,
    parse_delete_query,
    parse_journal_id,
    parse_read_query,
)


def body(obj: object) -> bytes:
    """JSON as a client might send it: stdlib json writes big integers and lone surrogates
    (as \\u escapes), which orjson refuses to produce."""
    return json.dumps(obj).encode()


def query(*pairs: tuple[str, str]) -> MultiDictProxy[str]:
    return MultiDictProxy(MultiDict(pairs))


def fails(code: ErrorCode, call: object, *args: object) -> ApiError:
    assert callable(call)
    with pytest.raises(ApiError) as caught:
        call(*args)
    assert caught.value.status == 400
    assert caught.value.code == code, caught.value.message
    assert caught.value.message
    return caught.value


# --- appends that parse ----------------------------------------------------------------------


FULL_APPEND = body(
    {
        "events": [
            {"seqNr": 7, "payload": {"a": [1, 2.5, None, True]}, "tags": ["x", "y"]},
            {"seqNr": 8, "payloadText": "text ✓"},
            {"seqNr": 9, "payloadBinary": base64.b64encode(b"\x00\xff").decode()},
            {"seqNr": 10},
            {"seqNr": 11, "payload": None},
        ],
        "metadata": {"m": 1},
        "headers": {"h": "v"},
        "expireAfter": "P1D",
    }
)
NULLS_APPEND = body({"events": [{"seqNr": 1, "tags": None}], "metadata": None, "headers": None})
LIMITS_APPEND = (
    f'{{"events":[{{"seqNr":{SEQ_NR_MAX},"payload":[{2**64 - 1},{-(2**63)}]}}]}}'.encode()
)
#: a payload is kept as its text: integers of any size survive, as written
BIG_INTS_PAYLOAD = f'[{2**64}, {-(2**63) - 1}, {{"n": {10**40}}}]'.encode()
BIG_INTS_APPEND = b'{"events": [{"seqNr": 1, "payload": ' + BIG_INTS_PAYLOAD + b"}]}"
#: every append body the tests here hold valid
#: appends at the journal's end: no event has a seqNr
AT_END_APPENDS = [
    body({"events": [{"payload": 1}, {"payloadText": "t", "tags": ["x"]}], "expectedSeqNr": 4}),
    body({"events": [{}]}),
]
VALID_APPENDS = [FULL_APPEND, NULLS_APPEND, LIMITS_APPEND, BIG_INTS_APPEND, *AT_END_APPENDS]


def test_a_full_append_parses() -> None:
    parsed = parse_append(FULL_APPEND)
    assert parsed == ParsedAppend(
        events=(
            # the payload's text as sent (json.dumps spaces it)
            Event(7, frozenset({"x", "y"}), JsonPayload(b'{"a": [1, 2.5, null, true]}')),
            Event(8, frozenset(), TextPayload("text ✓")),
            Event(9, frozenset(), BinaryPayload(b"\x00\xff")),
            Event(10),
            Event(11),  # a null payload is no payload, as kafka-journal reads it
        ),
        metadata=PayloadMetadata(expire_after="1 day", data={"m": 1}),
        headers={"h": "v"},
    )


def test_optional_fields_may_be_null_or_absent() -> None:
    parsed = parse_append(NULLS_APPEND)
    assert parsed == ParsedAppend((Event(1),))


def test_the_largest_seq_nr_and_64_bit_payload_numbers_are_accepted() -> None:
    parsed = parse_append(LIMITS_APPEND)
    assert parsed.events == (Event(SEQ_NR_MAX, payload=JsonPayload.of([2**64 - 1, -(2**63)])),)


def test_integers_beyond_64_bits_stay_exact() -> None:
    """A payload is kept as its text; the metadata is a value the codec stores in 64 bits."""
    beyond = 2**64
    parsed = parse_append(BIG_INTS_APPEND)
    assert parsed.events == (Event(1, payload=JsonPayload(BIG_INTS_PAYLOAD)),)
    assert JsonPayload(BIG_INTS_PAYLOAD).value == [beyond, -(2**63) - 1, {"n": 10**40}]
    error = fails(
        ErrorCode.INVALID_BODY, parse_append, body({"events": [{"seqNr": 1}], "metadata": beyond})
    )
    assert f"the integer {beyond}, beyond 64 bits" in error.message
    # a long run of digits in a string means what it says
    digits = "1" * 30
    parsed = parse_append(body({"events": [{"seqNr": 1, "payloadText": digits}]}))
    assert parsed.events == (Event(1, payload=TextPayload(digits)),)


def test_a_payload_is_kept_as_sent_without_the_whitespace_around_it() -> None:
    parsed = parse_append(b'{"events":[{"seqNr":1,"payload": \n{"b": 1.0e2, "a": [ ]} }]}')
    assert parsed.events == (Event(1, payload=JsonPayload(b'{"b": 1.0e2, "a": [ ]}')),)


# --- appends that do not ---------------------------------------------------------------------


MALFORMED = [
    b"",
    b"{",
    b"nope",
    b'{"events": [}',
    b"\xff\xfe{}",
    b'{"events": NaN}',
    b'{"a": 1e999}',
    b'{"events": [{"seqNr": 1, "payload": [1e999]}]}',  # a payload's numbers fit a float
    b'{"events": [{"seqNr": 1, "payload": "\xff"}]}',  # a payload's text is UTF-8
]
TOO_DEEP = b"[" * 100_000 + b"]" * 100_000
_NESTED = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
DEEP_PAYLOAD = f'{{"events":[{{"seqNr":1,"payload":{_NESTED}}}]}}'.encode()


@pytest.mark.parametrize("raw", MALFORMED)
def test_malformed_json(raw: bytes) -> None:
    fails(ErrorCode.MALFORMED_JSON, parse_append, raw)


def test_deep_nesting_is_refused_not_crashed() -> None:
    fails(ErrorCode.MALFORMED_JSON, parse_append, TOO_DEEP)
    fails(ErrorCode.INVALID_PAYLOAD, parse_append, DEEP_PAYLOAD)


WRONG_SHAPES: list[object] = [
    [],
    "events",
    {},
    {"events": None},
    {"events": {}},
    {"events": []},
    {"events": [1]},
    {"events": [{"seqNr": 1, "tags": "t"}]},
    {"events": [{"seqNr": 1, "tags": [1]}]},
    {"events": [{"seqNr": 1, "extra": 1}]},
    {"events": [{"seqNr": 1}], "expire_after": "P1D"},
    {"events": [{"seqNr": 1}], "metadata": {"deep": "\ud800"}},
]


@pytest.mark.parametrize("obj", WRONG_SHAPES)
def test_wrong_shapes_and_types(obj: object) -> None:
    fails(ErrorCode.INVALID_BODY, parse_append, body(obj))


BAD_SEQ_NRS = [
    b'{"events":[{"seqNr":0}]}',
    b'{"events":[{"seqNr":-1}]}',
    b'{"events":[{"seqNr":"1"}]}',
    b'{"events":[{"seqNr":true}]}',
    b'{"events":[{"seqNr":1.5}]}',
    b'{"events":[{"seqNr":1.0}]}',
    b'{"events":[{"seqNr":1e3}]}',
    b'{"events":[{"seqNr":null}]}',
    b'{"events":[{"seqNr":9223372036854775808}]}',
    b'{"events":[{"seqNr":100000000000000000000000000}]}',
]
#: refused by the core's `check_consecutive` at the append, not by the parse (see test_app)
GAPPED_APPENDS = [
    b'{"events":[{"seqNr":1},{"seqNr":3}]}',
    b'{"events":[{"seqNr":2},{"seqNr":1}]}',
    b'{"events":[{"seqNr":1},{"seqNr":1}]}',
    b'{"events": [{"seqNr": 1}, {"seqNr": 3}]}',
]


@pytest.mark.parametrize("raw", BAD_SEQ_NRS)
def test_bad_seq_nrs(raw: bytes) -> None:
    fails(ErrorCode.INVALID_SEQ_NR, parse_append, raw)


def test_events_without_seq_nrs_are_to_append_at_the_end() -> None:
    with_some, without_any = (parse_append(raw) for raw in AT_END_APPENDS)
    assert with_some == ParsedAppend(
        events=(NewEvent(payload=JsonPayload(b"1")), NewEvent(frozenset({"x"}), TextPayload("t"))),
        expected_seq_nr=4,  # "at the end if the journal is still at 4": from seqNr 5
    )
    assert without_any.events == (NewEvent(),)


#: every event of a body has a seqNr, or none has
MIXED_SEQ_NRS = [
    b'{"events":[{"seqNr":1},{"payload":2}]}',
    b'{"events":[{"payload":1},{"seqNr":2}]}',
    b'{"events":[{},{},{"seqNr":3}]}',
]


@pytest.mark.parametrize("raw", MIXED_SEQ_NRS)
def test_a_body_mixing_events_with_and_without_seq_nrs_is_refused(raw: bytes) -> None:
    error = fails(ErrorCode.INVALID_SEQ_NR, parse_append, raw)
    assert "every event of a body has a seqNr, or none has" in error.message


def test_the_ack_parameter_says_when_an_append_is_answered() -> None:
    assert parse_append_query(query()) is Ack.VERIFIED
    assert parse_append_query(query(("ack", "verified"))) is Ack.VERIFIED
    assert parse_append_query(query(("ack", "kafka"))) is Ack.KAFKA
    for pairs in ([("ack", "")], [("ack", "KAFKA")], [("ack", "kafka"), ("ack", "kafka")]):
        fails(ErrorCode.INVALID_QUERY, parse_append_query, query(*pairs))
    fails(ErrorCode.INVALID_QUERY, parse_append_query, query(("acks", "all")))


def test_an_out_of_range_seq_nr_is_named_in_the_message() -> None:
    error = fails(ErrorCode.INVALID_SEQ_NR, parse_append, b'{"events":[{"seqNr":1},{"seqNr":0}]}')
    assert error.message == "events[1].seqNr must be at least 1"


BAD_PAYLOAD_EVENTS: list[dict[str, object]] = [
    {"seqNr": 1, "payload": 1, "payloadText": "t"},
    {"seqNr": 1, "payload": None, "payloadBinary": ""},
    {"seqNr": 1, "payloadText": "t", "payloadBinary": ""},
    {"seqNr": 1, "payloadText": 1},
    {"seqNr": 1, "payloadText": None},
    {"seqNr": 1, "payloadBinary": "not base64!"},
    {"seqNr": 1, "payloadBinary": "QUJD="},  # surplus padding
    {"seqNr": 1, "payloadBinary": "QUK="},  # stray low bits ("QUI=" is canonical)
    {"seqNr": 1, "payloadBinary": "QUJD-_"},  # the URL-safe alphabet
    {"seqNr": 1, "payloadBinary": 12},
]
SURROGATE_EVENTS: list[dict[str, object]] = [
    {"seqNr": 1, "payloadText": "\udc00"},
    {"seqNr": 1, "payload": {"\udc00": 1}},
]


@pytest.mark.parametrize("event", BAD_PAYLOAD_EVENTS)
def test_bad_payloads(event: dict[str, object]) -> None:
    fails(ErrorCode.INVALID_PAYLOAD, parse_append, body({"events": [event]}))


def test_a_lone_surrogate_in_a_payload_is_refused() -> None:
    for event in SURROGATE_EVENTS:
        fails(ErrorCode.INVALID_PAYLOAD, parse_append, body({"events": [event]}))


BAD_HEADERS: list[object] = [[], "h", {"h": 1}, {"h": None}, {"": "v"}, {"journal.action": "{}"}]


@pytest.mark.parametrize("headers", BAD_HEADERS)
def test_bad_headers(headers: object) -> None:
    fails(
        ErrorCode.INVALID_HEADERS,
        parse_append,
        body({"events": [{"seqNr": 1}], "headers": headers}),
    )


BAD_EXPIRE_AFTERS: list[object] = [
    1,
    "1 day",
    "P",
    "PT",
    "P1DT",
    "P1Y",
    "P1M",
    "P0D",
    "PT0S",
    "-P1D",
    "p1d",
    "P1.5DT1H",
    "PT0.0000000001S",
    "PT1.0000000000000000000000000001S",  # finer than 1 ns beyond 28 significant digits
    "P" + "1" * 80 + "D",
    "P99999999999D",  # beyond Scala's Long nanoseconds
]


@pytest.mark.parametrize("expire_after", BAD_EXPIRE_AFTERS)
def test_bad_expire_after(expire_after: object) -> None:
    raw = body({"events": [{"seqNr": 1}], "expireAfter": expire_after})
    fails(ErrorCode.INVALID_EXPIRE_AFTER, parse_append, raw)


# --- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("iso", "text"),
    [
        ("P1D", "1 day"),
        ("PT1H", "1 hour"),
        ("PT36H", "36 hours"),
        ("P1DT12H", "36 hours"),
        ("P1.5D", "36 hours"),
        ("P2W", "14 days"),
        ("PT1M", "1 minute"),
        ("PT90S", "90 seconds"),
        ("PT0.5S", "500 milliseconds"),
        ("PT0,001S", "1 millisecond"),
        ("PT0.000000001S", "1 nanosecond"),
    ],
)
def test_iso_durations_become_kafka_journal_text(iso: str, text: str) -> None:
    assert str(iso_to_duration(iso)) == text


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("1 day", "P1D"),
        ("36 hours", "P1DT12H"),
        ("90 seconds", "PT1M30S"),
        ("500 milliseconds", "PT0.5S"),
        ("1 nanosecond", "PT0.000000001S"),
        ("3 minutes", "PT3M"),
        ("0 seconds", "PT0S"),
    ],
)
def test_stored_durations_read_back_as_iso(text: str, iso: str) -> None:
    assert expire_after_to_iso(text) == iso
    if iso != "PT0S":
        assert duration_to_iso(iso_to_duration(iso)) == iso


def test_an_unreadable_stored_duration_is_not_an_error() -> None:
    assert expire_after_to_iso("forever") is None


# --- query parameters and ids ----------------------------------------------------------------


VALID_READ_QUERIES = [[], [("from", "3"), ("to", "9"), ("limit", "0")], [("to", str(SEQ_NR_MAX))]]


def test_read_query_defaults_and_values() -> None:
    defaults, values, largest = VALID_READ_QUERIES
    assert parse_read_query(query(*defaults)) == ParsedRead(1, SEQ_NR_MAX, None)
    assert parse_read_query(query(*values)) == ParsedRead(3, 9, 0)
    assert parse_read_query(query(*largest)).to == SEQ_NR_MAX


BAD_READ_QUERIES: list[list[tuple[str, str]]] = [
    [("from", "abc")],
    [("from", "0")],
    [("from", "")],
    [("from", "-1")],
    [("from", "+1")],
    [("from", " 1")],
    [("from", "1_000")],
    [("from", "1.0")],
    [("from", "\u0661")],  # an Arabic-Indic digit: int() would take it
    [("to", str(SEQ_NR_MAX + 1))],
    [("to", "0")],
    [("limit", "-1")],
    [("limit", "x")],
    [("limit", "99999999999999999999999")],
    [("from", "1"), ("from", "2")],
    [("form", "1")],
]


@pytest.mark.parametrize("pairs", BAD_READ_QUERIES)
def test_bad_read_queries(pairs: list[tuple[str, str]]) -> None:
    fails(ErrorCode.INVALID_QUERY, parse_read_query, query(*pairs))


def test_delete_query() -> None:
    assert parse_delete_query(query(("to", "5"))) == 5
    for pairs in ([], [("to", "0")], [("to", "x")], [("to", "1"), ("from", "1")]):
        fails(ErrorCode.INVALID_QUERY, parse_delete_query, query(*pairs))


def test_journal_ids_are_decoded_strictly() -> None:
    assert parse_journal_id("a%20b%2F%C3%BC") == "a b/ü"
    assert parse_journal_id("%25ff") == "%ff"
    fails(ErrorCode.INVALID_JOURNAL_ID, parse_journal_id, "%ff")  # not UTF-8: not "%ff" again
    fails(ErrorCode.INVALID_JOURNAL_ID, parse_journal_id, "%ED%A0%80")  # an encoded surrogate
    fails(ErrorCode.INVALID_JOURNAL_ID, parse_journal_id, "")
