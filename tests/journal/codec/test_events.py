"""The record-value codec (binary and JSON Events) against kafka-journal's vectors and by property.

Expected values are built from the vectors' naming conventions (see the vectors' README):
event(n) has seqNr n and tags "0".."n"; `meta` is expireAfter 1 day with data {"key":"value"}.
"""

from __future__ import annotations

import contextlib
import re
import struct
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from journal.codec import DecodeError, EncodeError, decode_events, encode_events
from journal.codec.envelope import with_append_envelope
from journal.codec.events_binary import _decode_careful, _decode_fast, encode_events_binary
from journal.codec.events_json import checked_events, decode_events_json, encode_events_json
from journal.codec.payload_metadata import payload_metadata_to_json
from journal.codec.tag_order import scala_set_order
from journal.core.model import (
    SEQ_NR_MAX,
    BinaryPayload,
    Event,
    Events,
    InvalidValue,
    Json,
    JsonPayload,
    Payload,
    PayloadMetadata,
    PayloadType,
    TextPayload,
    checked_json_payload,
    of_json,
)
from tests.journal.codec.strategies import json_values

BINARY, JSON = PayloadType.BINARY, PayloadType.JSON

# --- the reference vectors -------------------------------------------------------------------


def event(seq_nr: int, payload: Payload | None = None) -> Event:
    return Event(seq_nr, frozenset(str(i) for i in range(seq_nr + 1)), payload)


META = PayloadMetadata(expire_after="1 day", data={"key": "value"})
NO_META = PayloadMetadata()
MAKERS: dict[str, Callable[[str], Payload | None]] = {
    "empty": lambda _: None,
    "binary": lambda s: BinaryPayload(s.encode()),
    "text": TextPayload,
    "json": JsonPayload.of,
}


def batch(name: str, many: int, single: Callable[[str], str]) -> tuple[Event, ...]:
    """The events of the vector named `name`: `many` events for -many, one otherwise."""
    if name == "empty-binary-text-json":
        return (
            event(1),
            event(2, BinaryPayload(b"binary")),
            event(3, TextPayload("text")),
            event(4, JsonPayload.of("json")),
        )
    kind, _, suffix = name.partition("-")
    make = MAKERS[kind]
    if suffix == "many":
        return tuple(event(n, make(str(n))) for n in range(1, many + 1))
    return (event(1, make(single(kind))),)


NAMES = [
    "empty",
    "binary",
    "text",
    "json",
    "empty-many",
    "binary-many",
    "text-many",
    "json-many",
    "empty-binary-text-json",
]
HAS_BINARY = {"binary", "binary-many", "empty-binary-text-json"}


def _payload_vectors() -> dict[str, tuple[PayloadType, Events, bool]]:
    """`Payload-*` file -> (payloadType, events, current form?)."""

    def single(kind: str) -> str:
        return ' {"key":"value"} ' if kind == "text" else "payload"

    cases = {}
    for name in NAMES:
        payload_type = BINARY if name in HAS_BINARY else JSON
        metadata = META if "-" in name else NO_META
        extension = "bin" if payload_type is BINARY else "json"
        cases[f"Payload-{name}.{extension}"] = (
            payload_type,
            Events(batch(name, 2, single), metadata),
            True,
        )
        if payload_type is JSON:
            cases[f"Payload-v0-{name}.json"] = (JSON, Events(batch(name, 2, single)), False)
    return cases


def _events_vectors() -> dict[str, tuple[Events, bool]]:
    """`v0-events-*`/`v1-events-*` file -> (events, current form?)."""
    cases = {}
    for name in NAMES:
        events = batch(name, 3, lambda kind: kind)
        v1_metadata = NO_META if name in ("empty", "binary", "text") else META
        cases[f"v1-events-{name}.bin"] = (Events(events, v1_metadata), True)
        cases[f"v0-events-{name}.bin"] = (Events(events), False)
    return cases


PAYLOAD_VECTORS = _payload_vectors()
EVENTS_VECTORS = _events_vectors()


def test_every_events_vector_is_checked(vectors: Path) -> None:
    files = {p.name for p in vectors.iterdir() if re.match(r"(Payload-|v\d+-events-)", p.name)}
    assert files == set(PAYLOAD_VECTORS) | set(EVENTS_VECTORS)


@pytest.mark.parametrize("name", sorted(PAYLOAD_VECTORS))
def test_record_value_vector_decodes(vectors: Path, name: str) -> None:
    payload_type, expected, _ = PAYLOAD_VECTORS[name]
    assert decode_events(payload_type, (vectors / name).read_bytes()) == expected


@pytest.mark.parametrize(
    "name", sorted(n for n, (_, _, current) in PAYLOAD_VECTORS.items() if current)
)
def test_record_value_vector_reencodes(vectors: Path, name: str) -> None:
    payload_type, events, _ = PAYLOAD_VECTORS[name]
    expected = (vectors / name).read_bytes()
    encoded_type, encoded = encode_events(events)
    assert encoded_type is payload_type
    if payload_type is BINARY:
        assert encoded == expected
    else:
        assert orjson.loads(encoded) == orjson.loads(expected)


@pytest.mark.parametrize("name", sorted(EVENTS_VECTORS))
def test_binary_events_vector_decodes(vectors: Path, name: str) -> None:
    assert decode_events(BINARY, (vectors / name).read_bytes()) == EVENTS_VECTORS[name][0]


@pytest.mark.parametrize("name", sorted(n for n, (_, current) in EVENTS_VECTORS.items() if current))
def test_binary_events_vector_reencodes_byte_for_byte(vectors: Path, name: str) -> None:
    assert encode_events_binary(EVENTS_VECTORS[name][0]) == (vectors / name).read_bytes()


# --- the binary layout, independent of the vectors ---------------------------------------------


def sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def binary_event(seq_nr: int, tags: list[str], kind: int, payload: bytes) -> bytes:
    tag_bytes = b"".join(sized(tag.encode()) for tag in tags)
    return sized(struct.pack(">q", seq_nr) + sized(tag_bytes) + bytes([kind]) + sized(payload))


def binary_value(version: int, events: list[bytes], metadata: bytes = b"") -> bytes:
    return bytes([version]) + struct.pack(">i", len(events)) + b"".join(events) + metadata


LAYOUT_EVENTS = Events(
    (
        Event(7, frozenset({"a"}), TextPayload("hé")),
        Event(8, frozenset(), JsonPayload.of([1, {"k": None}])),
        Event(9, frozenset({"x", "y"}), BinaryPayload(b"\x00\xff")),
        Event(10),
    ),
    PayloadMetadata(data=[True]),
)
LAYOUT_EVENT_BYTES = [
    binary_event(7, ["a"], 3, "hé".encode()),
    binary_event(8, [], 2, b'[1,{"k":null}]'),
    binary_event(9, ["x", "y"], 1, b"\x00\xff"),
    binary_event(10, [], 0, b""),
]


def test_binary_layout() -> None:
    value = binary_value(1, LAYOUT_EVENT_BYTES, b'{"data":[true]}')
    assert encode_events(LAYOUT_EVENTS) == (BINARY, value)
    assert decode_events(BINARY, value) == LAYOUT_EVENTS


def test_binary_v0_layout_has_no_metadata() -> None:
    value = binary_value(0, LAYOUT_EVENT_BYTES)
    assert decode_events(BINARY, value) == Events(LAYOUT_EVENTS.events)


def test_five_tags_are_written_in_scala_hash_set_order() -> None:
    # kafka-journal (Scala 2.13 HashSet) writes {"0".."4"} as 4, 1, 0, 2, 3; smaller sets sorted.
    value = encode_events_binary(Events((event(4),)))
    assert value == binary_value(1, [binary_event(4, ["4", "1", "0", "2", "3"], 0, b"")], b"{}")


def test_a_record_value_is_never_text() -> None:
    with pytest.raises(DecodeError):
        decode_events(PayloadType.TEXT, encode_events(Events((event(1),)))[1])


GOOD_EVENT = binary_event(1, [], 0, b"")
BINARY_MALFORMED = {
    "empty": b"",
    "version only": b"\x01",
    "unknown version": binary_value(2, [GOOD_EVENT], b"{}"),
    "no events": binary_value(1, [], b"{}"),
    "negative count": b"\x01\xff\xff\xff\xff{}",
    "count above events": b"\x01\x00\x00\x00\x02" + GOOD_EVENT + b"{}",
    "v1 without metadata": binary_value(1, [GOOD_EVENT]),
    "v1 metadata not json": binary_value(1, [GOOD_EVENT], b"{x}"),
    "v1 metadata not object": binary_value(1, [GOOD_EVENT], b"[]"),
    "v1 metadata bad expireAfter": binary_value(1, [GOOD_EVENT], b'{"expireAfter":"soon"}'),
    "v0 trailing bytes": binary_value(0, [GOOD_EVENT], b"{}"),
    "negative event length": b"\x01\x00\x00\x00\x01\xff\xff\xff\xf0",
    "event length past end": b"\x01\x00\x00\x00\x01\x00\x00\x01\x00" + GOOD_EVENT[4:] + b"{}",
    "trailing bytes in event": binary_value(1, [sized(GOOD_EVENT[4:] + b"\x00")], b"{}"),
    "seqNr zero": binary_value(1, [binary_event(0, [], 0, b"")], b"{}"),
    "seqNr negative": binary_value(1, [binary_event(-5, [], 0, b"")], b"{}"),
    "seqNr gap": binary_value(1, [GOOD_EVENT, binary_event(3, [], 0, b"")], b"{}"),
    "seqNr descending": binary_value(1, [binary_event(2, [], 0, b""), GOOD_EVENT], b"{}"),
    "unknown payload kind": binary_value(1, [binary_event(1, [], 4, b"")], b"{}"),
    "none payload with bytes": binary_value(1, [binary_event(1, [], 0, b"x")], b"{}"),
    "json payload not json": binary_value(1, [binary_event(1, [], 2, b"{")], b"{}"),
    "json payload empty": binary_value(1, [binary_event(1, [], 2, b"")], b"{}"),
    "text payload not utf-8": binary_value(1, [binary_event(1, [], 3, b"\xc3")], b"{}"),
    "tag not utf-8": binary_value(
        1, [sized(struct.pack(">q", 1) + sized(sized(b"\xff")) + b"\x00" + sized(b""))], b"{}"
    ),
    "tag list cut mid-tag": binary_value(
        1, [sized(struct.pack(">q", 1) + sized(b"\x00\x00") + b"\x00" + sized(b""))], b"{}"
    ),
}


@pytest.mark.parametrize("value", BINARY_MALFORMED.values(), ids=BINARY_MALFORMED.keys())
def test_malformed_binary_raises_decode_error(value: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_events(BINARY, value)


def json_value(events: list[dict[str, object]], **extra: object) -> bytes:
    return orjson.dumps({"events": events, **extra})


JSON_MALFORMED = {
    "not json": b'{"events":',
    "not utf-8": b'{"events":[{"seqNr":1,"tags":["\xff"]}]}',
    "top-level array": b"[]",
    "no events": b'{"metadata":{}}',
    "events empty": json_value([]),
    "events not array": json_value({"seqNr": 1, "tags": []}),  # type: ignore[arg-type]
    "event not object": json_value([1]),  # type: ignore[list-item]
    "seqNr missing": json_value([{"tags": []}]),
    "seqNr string": json_value([{"seqNr": "1", "tags": []}]),
    "seqNr float": json_value([{"seqNr": 1.5, "tags": []}]),
    "seqNr boolean": json_value([{"seqNr": True, "tags": []}]),
    "seqNr zero": json_value([{"seqNr": 0, "tags": []}]),
    "seqNr gap": json_value([{"seqNr": 1, "tags": []}, {"seqNr": 3, "tags": []}]),
    "tags missing": json_value([{"seqNr": 1}]),
    "tags not array": json_value([{"seqNr": 1, "tags": "a"}]),
    "tag not string": json_value([{"seqNr": 1, "tags": [1]}]),
    "payloadType binary": json_value(
        [{"seqNr": 1, "tags": [], "payloadType": "binary", "payload": "AA=="}]
    ),
    "payloadType number": json_value([{"seqNr": 1, "tags": [], "payloadType": 2}]),
    "payloadType empty": json_value([{"seqNr": 1, "tags": [], "payloadType": ""}]),
    "text payload not string": json_value(
        [{"seqNr": 1, "tags": [], "payloadType": "text", "payload": {"a": 1}}]
    ),
    "metadata not object": json_value([{"seqNr": 1, "tags": []}], metadata=[]),
    "expireAfter boolean": json_value([{"seqNr": 1, "tags": []}], metadata={"expireAfter": True}),
}


@pytest.mark.parametrize("value", JSON_MALFORMED.values(), ids=JSON_MALFORMED.keys())
def test_malformed_json_raises_decode_error(value: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_events(JSON, value)


def test_json_defaults() -> None:
    # No payloadType means json; a null payload is none (as kafka-journal reads it); v0 has no
    # metadata.
    value = json_value(
        [
            {"seqNr": 5, "tags": ["t", "t"], "payload": {"a": 1}},
            {"seqNr": 6, "tags": [], "payload": None},
            {"seqNr": 7, "tags": [], "payloadType": "text"},
        ],
        metadata=None,
    )
    assert decode_events(JSON, value) == Events(
        (
            Event(5, frozenset({"t"}), JsonPayload.of({"a": 1})),
            Event(6),
            Event(7),
        )
    )


# --- expireAfter: Scala's FiniteDuration text ---------------------------------------------------

EXPIRE_AFTER = {
    "1 day": "1 day",
    "1d": "1 day",
    "2 days": "2 days",
    "24 hours": "24 hours",  # an integral length keeps its unit (Scala 2.13)
    "1.5 days": "36 hours",  # a fractional one goes through nanoseconds to the coarsest unit
    " 3\tmin ": "3 minutes",
    "3m": "3 minutes",
    "1 hr": "1 hour",
    "0.5ms": "500 microseconds",
    "1e3 s": "1000 seconds",
    "+5 nanos": "5 nanoseconds",
    "-1 day": "-1 days",
    "7 µs": "7 microseconds",
    86_400_000: "86400000 milliseconds",  # a bare number is milliseconds
    1: "1 millisecond",
    5e3: "5000 milliseconds",
}
BAD_EXPIRE_AFTER = [
    "Inf",
    "1 ds",
    "days",
    "",
    "1.5",
    "1 fortnight",
    "0x10 s",
    "9223372036854775807 days",
    "1e400 s",
    1.5,
    [],
    {},
]


@pytest.mark.parametrize(("raw", "text"), EXPIRE_AFTER.items(), ids=map(str, EXPIRE_AFTER))
def test_expire_after_reads_as_scala_writes_it(raw: Json, text: str) -> None:
    value = json_value([{"seqNr": 1, "tags": []}], metadata={"expireAfter": raw})
    assert decode_events(JSON, value).metadata == PayloadMetadata(expire_after=text)


@pytest.mark.parametrize("raw", BAD_EXPIRE_AFTER, ids=map(repr, BAD_EXPIRE_AFTER))
def test_bad_expire_after_raises_decode_error(raw: Json) -> None:
    value = json_value([{"seqNr": 1, "tags": []}], metadata={"expireAfter": raw})
    with pytest.raises(DecodeError):
        decode_events(JSON, value)


def test_expire_after_is_written_canonically() -> None:
    events = Events((event(1),), PayloadMetadata(expire_after="1.5d"))
    assert decode_events(*encode_events(events)).metadata.expire_after == "36 hours"


# --- what cannot be encoded ---------------------------------------------------------------------

ENCODE_ERRORS = {
    "no events": Events(()),
    "seqNr gap": Events((event(1), event(3))),
    "bad expireAfter": Events((event(1),), PayloadMetadata(expire_after="soon")),
    "infinite metadata": Events((event(1),), PayloadMetadata(data={"x": float("inf")})),
    "lone surrogate text, json": Events((event(1, TextPayload("\ud800")),)),
    "lone surrogate text, binary": Events(
        (event(1, TextPayload("\ud800")), event(2, BinaryPayload(b""))),
    ),
    "lone surrogate tag": Events((Event(1, frozenset({"\udfff"}), BinaryPayload(b"")),)),
}


NOT_JSON: dict[str, object] = {
    "NaN": float("nan"),
    "infinity": [float("inf")],
    "tuple": (1, 2),
    "non-string key": {1: 2},
    "lone surrogate": {"a": "\ud800"},
}


@pytest.mark.parametrize("value", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_a_payload_is_checked_where_it_is_made(value: object) -> None:
    with pytest.raises(InvalidValue):
        JsonPayload.of(value)  # type: ignore[arg-type]


def test_integers_beyond_64_bits_and_number_spellings_travel_unchanged() -> None:
    text = b'{"big": 123456789012345678901234567890, "spelt": 1.50, "e": 1E+2}'
    events = Events((event(1, checked_json_payload(text)),))
    decoded = decode_events(*encode_events(events))
    assert decoded == events
    assert isinstance(decoded.events[0].payload, JsonPayload)
    assert decoded.events[0].payload.raw == text


@pytest.mark.parametrize("events", ENCODE_ERRORS.values(), ids=ENCODE_ERRORS.keys())
def test_unencodable_events_raise_encode_error(events: Events) -> None:
    with pytest.raises(EncodeError):
        encode_events(events)


# --- properties --------------------------------------------------------------------------------

payloads: st.SearchStrategy[Payload | None] = st.one_of(
    st.none(),
    st.builds(of_json, json_values),
    st.builds(TextPayload, st.text()),
    st.builds(BinaryPayload, st.binary()),
)
UNIT_NAMES = ["day", "hour", "minute", "second", "millisecond", "microsecond", "nanosecond"]
durations = st.builds(
    lambda length, unit: f"{length} {unit}{'' if length == 1 else 's'}",
    st.integers(-(10**5), 10**5),  # within Scala's bound for days
    st.sampled_from(UNIT_NAMES),
)
metadatas = st.builds(PayloadMetadata, st.none() | durations, json_values)


@st.composite
def events_batches(
    draw: st.DrawFn, payload: st.SearchStrategy[Payload | None] = payloads
) -> Events:
    count = draw(st.integers(1, 5))
    first = draw(st.integers(1, SEQ_NR_MAX - count + 1) | st.integers(1, 10))
    return Events(
        tuple(
            Event(seq_nr, draw(st.frozensets(st.text(max_size=4), max_size=8)), draw(payload))
            for seq_nr in range(first, first + count)
        ),
        draw(metadatas),
    )


@given(events_batches())
def test_events_round_trip(events: Events) -> None:
    payload_type, value = encode_events(events)
    has_binary = any(isinstance(e.payload, BinaryPayload) for e in events.events)
    assert payload_type is (BINARY if has_binary else JSON)
    assert decode_events(payload_type, value) == events


@given(events_batches())
def test_binary_codec_round_trips_every_payload_kind(events: Events) -> None:
    assert decode_events(BINARY, encode_events_binary(events)) == events


@given(events_batches(), st.data())
def test_truncated_value_raises_decode_error(events: Events, data: st.DataObject) -> None:
    payload_type, value = encode_events(events)
    cut = data.draw(st.integers(0, len(value) - 1))
    with pytest.raises(DecodeError):
        decode_events(payload_type, value[:cut])


@given(events_batches(), st.data())
def test_corrupted_binary_decodes_or_raises_decode_error(
    events: Events, data: st.DataObject
) -> None:
    value = bytearray(encode_events_binary(events))
    index = data.draw(st.integers(0, len(value) - 1))
    replacement = data.draw(st.integers(0, 255))
    assume(value[index] != replacement)
    value[index] = replacement
    with contextlib.suppress(DecodeError):
        decode_events(BINARY, bytes(value))


@given(st.sampled_from([BINARY, JSON]), st.binary())
def test_random_bytes_decode_or_raise_decode_error(payload_type: PayloadType, raw: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_events(payload_type, raw)


@given(events_batches(payloads.filter(lambda p: not isinstance(p, BinaryPayload))), st.data())
def test_json_field_of_any_value_decodes_or_raises_decode_error(
    events: Events, data: st.DataObject
) -> None:
    payload_type, value = encode_events(events)
    assert payload_type is JSON
    obj = orjson.loads(value)
    target = data.draw(st.sampled_from([obj, obj["metadata"], *obj["events"]]))
    key = data.draw(
        st.sampled_from(
            [
                "events",
                "metadata",
                "seqNr",
                "tags",
                "payloadType",
                "payload",
                "expireAfter",
                "data",
                *target,
            ]
        )
    )
    target[key] = data.draw(json_values)
    with contextlib.suppress(DecodeError):
        decode_events(JSON, orjson.dumps(obj))


@settings(max_examples=500)
@given(events_batches(payloads.filter(lambda p: not isinstance(p, BinaryPayload))), st.data())
def test_the_plain_reading_agrees_with_the_checked_one(events: Events, data: st.DataObject) -> None:
    """`decode_events_json` (msgspec's one pass, the fast path) answers what `checked_events`
    does: for written values and for any field of them replaced (or removed) by any JSON."""
    obj = orjson.loads(encode_events(events)[1])
    targets = [obj, obj["metadata"], *obj["events"]]
    for _ in range(data.draw(st.integers(0, 2))):
        target = data.draw(st.sampled_from(targets))
        key = data.draw(st.sampled_from(["events", "metadata", "seqNr", "tags", *target]))
        if data.draw(st.booleans()):
            target[key] = data.draw(st.one_of(st.sampled_from(["json", "text", 0]), json_values))
        else:
            target.pop(key, None)
    try:
        checked: Events | DecodeError | InvalidValue = checked_events(obj)
    except (DecodeError, InvalidValue) as error:
        checked = error
    try:
        plain: Events | DecodeError | InvalidValue = decode_events_json(orjson.dumps(obj))
    except (DecodeError, InvalidValue) as error:
        plain = error
    if isinstance(checked, Events):
        assert isinstance(plain, Events)
        assert _meanings(plain) == _meanings(checked)
    else:
        assert type(plain) is type(checked), (plain, checked)


def _meanings(events: Events) -> object:
    """The events with each JSON payload as the value it spells (the fast path keeps the text
    it read, the checked one writes the value again)."""
    return (
        [
            (e.seq_nr, e.tags, e.payload.value if isinstance(e.payload, JsonPayload) else e.payload)
            for e in events.events
        ],
        events.metadata,
    )


def test_a_null_json_payload_is_no_payload_both_ways(vectors: Path) -> None:
    # kafka-journal writes Payload.json(JsNull) as Payload-json.json with a null payload and
    # reads that back as no payload; so does this journal, and its own null payload is written
    # as kafka-journal's event without payload (Payload-empty.json).
    written = orjson.loads((vectors / "Payload-json.json").read_bytes())
    written["events"][0]["payload"] = None
    assert decode_events(JSON, orjson.dumps(written)) == Events((event(1),))
    assert decode_events(JSON, orjson.dumps(written)).events[0].payload is None
    payload_type, encoded = encode_events(Events((event(1, of_json(None)),)))
    assert payload_type is JSON
    assert orjson.loads(encoded) == orjson.loads((vectors / "Payload-empty.json").read_bytes())


def _compact_walk(events: Events) -> bytes:
    """The record value as a generic walk of its object writes it (msgspec, compact): what
    the template in `encode_events_json` must equal byte for byte."""

    def event_object(event: Event) -> dict[str, object]:
        obj: dict[str, object] = {"seqNr": event.seq_nr, "tags": scala_set_order(event.tags)}
        if isinstance(event.payload, JsonPayload):
            obj["payloadType"] = "json"
            obj["payload"] = msgspec.Raw(event.payload.raw)
        elif isinstance(event.payload, TextPayload):
            obj["payloadType"] = "text"
            obj["payload"] = event.payload.value
        return obj

    metadata = payload_metadata_to_json(events.metadata)
    return msgspec.json.encode(
        {
            "events": [event_object(event) for event in events.events],
            "metadata": msgspec.Raw(orjson.dumps(metadata)) if metadata else {},
        }
    )


@given(
    events_batches(
        st.one_of(st.none(), st.builds(of_json, json_values), st.builds(TextPayload, st.text()))
    )
)
def test_json_record_value_is_the_compact_walk_of_its_object(events: Events) -> None:
    try:
        expected = _compact_walk(events)
    except UnicodeEncodeError:  # a lone surrogate: refused, as below
        with pytest.raises(EncodeError):
            encode_events_json(events)
        return
    assert encode_events_json(events) == expected


@pytest.mark.parametrize("name", sorted(EVENTS_VECTORS))
def test_the_fast_binary_decoder_agrees_with_the_careful_one(vectors: Path, name: str) -> None:
    """`_decode_fast` (every read of a binary record) decodes each vector as `_decode_careful`
    does, and on a value cut short or with any byte changed gives the same Events or None (the
    careful decoder then names the fault): never a different answer."""
    value = (vectors / name).read_bytes()
    assert _decode_fast(value) == _decode_careful(value)
    for at in range(len(value)):
        flipped = value[:at] + bytes([value[at] ^ 0x41]) + value[at + 1 :]
        for broken in (value[:at], flipped):
            fast = _decode_fast(broken)
            if fast is None:
                continue
            careful = _decode_careful(broken)
            resolved = Events(with_append_envelope(careful.events), careful.metadata)
            assert fast == resolved, (at, broken)
