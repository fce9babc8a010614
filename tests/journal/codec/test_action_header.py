"""The `journal.action` header codec against kafka-journal's reference vectors, and by property."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.client.conditional import CONDITIONAL_HEADERS, Idempotency
from journal.codec import ACTION_HEADER, DecodeError, EncodeError
from journal.codec import decode_action_header as decode
from journal.codec import encode_action_header as encode
from journal.codec.action_header import checked_action_header, plain_append, plain_append_text
from journal.codec.actions import RawRecord, parse
from journal.core.model import (
    SEQ_NR_MAX,
    ActionHeader,
    AppendHeader,
    DeleteHeader,
    HeaderMetadata,
    Json,
    MarkHeader,
    PayloadType,
    PurgeHeader,
    SeqRange,
)
from journal.version import VERSION
from tests.journal.codec.strategies import json_values

# --- the reference vectors -------------------------------------------------------------------


def _expected_headers() -> dict[str, tuple[ActionHeader, bool]]:
    """Vector file name -> (the header it holds, whether it is a current form to re-encode)."""
    cases: dict[str, tuple[ActionHeader, bool]] = {}
    for origin in ("origin", None):
        origin_name = origin or "None"
        for payload_type in (PayloadType.JSON, PayloadType.BINARY):
            type_name = payload_type.value.capitalize()
            for metadata_name, metadata in (
                ("metadata", HeaderMetadata({"key": "value"})),
                ("none", HeaderMetadata()),
                ("legacy", HeaderMetadata()),
            ):
                header = AppendHeader(SeqRange(1, 5), payload_type, origin, None, metadata)
                name = f"Append-{origin_name}-{type_name}-{metadata_name}.json"
                cases[name] = (header, metadata_name != "legacy")
        cases[f"Delete-{origin_name}.json"] = (DeleteHeader(3, origin, "0.0.1"), True)
        cases[f"Purge-{origin_name}.json"] = (PurgeHeader(origin), True)
        cases[f"Mark-{origin_name}.json"] = (MarkHeader("id", origin), True)
    return cases


EXPECTED = _expected_headers()


def test_every_header_vector_is_checked(vectors: Path) -> None:
    files = {p.name for p in vectors.iterdir() if re.match(r"(Append|Delete|Purge|Mark)-", p.name)}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_decodes(vectors: Path, name: str) -> None:
    assert decode((vectors / name).read_bytes()) == EXPECTED[name][0]


@pytest.mark.parametrize("name", sorted(name for name, (_, current) in EXPECTED.items() if current))
def test_vector_reencodes_structurally(vectors: Path, name: str) -> None:
    assert orjson.loads(encode(EXPECTED[name][0])) == orjson.loads((vectors / name).read_bytes())


@pytest.mark.parametrize("name", sorted(name for name, (_, current) in EXPECTED.items() if current))
def test_vector_with_this_journals_version(vectors: Path, name: str) -> None:
    # The writer sets `version` on every action, as kafka-journal sets Version.current: the
    # vector's action with that one field added (Delete's "0.0.1" replaced), and read back.
    header = msgspec.structs.replace(EXPECTED[name][0], version=VERSION)
    expected = orjson.loads((vectors / name).read_bytes())
    (body,) = expected.values()
    body["version"] = VERSION
    assert orjson.loads(encode(header)) == expected
    assert decode(encode(header)) == header


# --- fixed cases -------------------------------------------------------------------------------


def test_header_key() -> None:
    assert ACTION_HEADER == "journal.action"


@pytest.mark.parametrize("raw", [b'{"new":{}}', b"{}", b'{"new":{"append":1},"x":[]}'])
def test_unknown_action_is_no_action(raw: bytes) -> None:
    assert decode(raw) is None


def test_unknown_fields_inside_an_action_are_ignored() -> None:
    raw = b'{"mark":{"id":"x","future":[1,2]},"other":{}}'
    assert decode(raw) == MarkHeader("x")


def test_null_optional_fields_read_as_absent() -> None:
    raw = (
        b'{"append":{"range":{"from":2,"to":2},"origin":null,"payloadType":"json","metadata":null}}'
    )
    assert decode(raw) == AppendHeader(SeqRange(2, 2), PayloadType.JSON)


MALFORMED = {
    "not json": b"{",
    "not utf-8": b'{"purge":{"origin":"\xff"}}',
    "empty": b"",
    "top-level array": b'[{"purge":{}}]',
    "top-level string": b'"purge"',
    "action not an object": b'{"append":1}',
    "action null": b'{"purge":null}',
    "two actions": b'{"purge":{},"mark":{"id":"x"}}',
    "append without range": b'{"append":{"payloadType":"json"}}',
    "append without payloadType": b'{"append":{"range":{"from":1,"to":1}}}',
    "append payloadType text": b'{"append":{"range":{"from":1,"to":1},"payloadType":"text"}}',
    "append payloadType number": b'{"append":{"range":{"from":1,"to":1},"payloadType":1}}',
    "range from above to": b'{"append":{"range":{"from":3,"to":2},"payloadType":"json"}}',
    "range from zero": b'{"append":{"range":{"from":0,"to":2},"payloadType":"json"}}',
    "range from string": b'{"append":{"range":{"from":"1","to":2},"payloadType":"json"}}',
    "range to float": b'{"append":{"range":{"from":1,"to":2.5},"payloadType":"json"}}',
    "range not object": b'{"append":{"range":[1,2],"payloadType":"json"}}',
    "seqNr above Long": b'{"delete":{"to":9223372036854775808}}',
    "metadata not object": b'{"append":{"range":{"from":1,"to":1},"payloadType":"json",'
    b'"metadata":5}}',
    "origin not string": b'{"purge":{"origin":5}}',
    "version not string": b'{"purge":{"version":["1"]}}',
    "delete without to": b'{"delete":{}}',
    "delete to boolean": b'{"delete":{"to":true}}',
    "delete to negative": b'{"delete":{"to":-1}}',
    "mark without id": b'{"mark":{}}',
    "mark id number": b'{"mark":{"id":1}}',
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_header_raises_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(raw)


def test_append_of_text_payload_type_cannot_be_encoded() -> None:
    with pytest.raises(EncodeError):
        encode(AppendHeader(SeqRange(1, 1), PayloadType.TEXT))


def test_a_lone_surrogate_in_a_string_field_cannot_be_encoded() -> None:
    for header in (
        PurgeHeader(origin="\ud800"),
        MarkHeader("\udfff"),
        DeleteHeader(1, None, "\ud800"),
    ):
        with pytest.raises(EncodeError):
            encode(header)


def test_non_finite_metadata_cannot_be_encoded() -> None:
    with pytest.raises(EncodeError):
        encode(AppendHeader(SeqRange(1, 1), PayloadType.JSON, metadata=HeaderMetadata([1e999])))


# --- properties --------------------------------------------------------------------------------

optional_texts = st.none() | st.text()
seq_nrs = st.integers(1, SEQ_NR_MAX)


@st.composite
def seq_ranges(draw: st.DrawFn) -> SeqRange:
    a, b = draw(seq_nrs), draw(seq_nrs)
    return SeqRange(min(a, b), max(a, b))


append_headers = st.builds(
    AppendHeader,
    range=seq_ranges(),
    payload_type=st.sampled_from([PayloadType.BINARY, PayloadType.JSON]),
    origin=optional_texts,
    version=optional_texts,
    metadata=st.builds(HeaderMetadata, json_values),
)
headers: st.SearchStrategy[ActionHeader] = st.one_of(
    append_headers,
    st.builds(DeleteHeader, to=seq_nrs, origin=optional_texts, version=optional_texts),
    st.builds(PurgeHeader, origin=optional_texts, version=optional_texts),
    st.builds(MarkHeader, id=st.text(), origin=optional_texts, version=optional_texts),
)


@given(headers)
def test_header_round_trips(header: ActionHeader) -> None:
    assert decode(encode(header)) == header


@given(headers)
def test_absent_optional_fields_are_omitted(header: ActionHeader) -> None:
    ((_, body),) = orjson.loads(encode(header)).items()
    assert None not in body.values()
    assert ("origin" in body) == (header.origin is not None)
    assert ("version" in body) == (header.version is not None)


def json_object(header: ActionHeader) -> dict[str, Json]:
    """The header as the JSON object the module docstring describes, fields in writing order."""
    body: dict[str, Json] = {}
    match header:
        case AppendHeader():
            body["range"] = {"from": header.range.from_, "to": header.range.to}
        case DeleteHeader():
            body["to"] = header.to
        case MarkHeader():
            body["id"] = header.id
    if header.origin is not None:
        body["origin"] = header.origin
    if header.version is not None:
        body["version"] = header.version
    if isinstance(header, AppendHeader):
        body["payloadType"] = header.payload_type.value
        data = header.metadata.data
        body["metadata"] = {} if data is None else {"data": data}
    name = type(header).__name__.removesuffix("Header").lower()
    return {name: body}


@given(headers)
def test_the_bytes_are_the_compact_json_of_the_header_object(header: ActionHeader) -> None:
    """Written directly, the bytes are still exactly what a JSON writer gives for the object."""
    assert encode(header) == orjson.dumps(json_object(header))


@given(st.binary())
def test_random_bytes_decode_or_raise_decode_error(raw: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(raw)


@given(headers, st.data())
def test_a_field_of_any_json_value_decodes_or_raises_decode_error(
    header: ActionHeader, data: st.DataObject
) -> None:
    obj = orjson.loads(encode(header))
    ((_, body),) = obj.items()
    key = data.draw(st.sampled_from([*body, "range", "to", "id", "payloadType", "metadata"]))
    body[key] = data.draw(json_values)
    try:
        result = decode(orjson.dumps(obj))
    except DecodeError:
        return
    assert isinstance(result, (AppendHeader, DeleteHeader, PurgeHeader, MarkHeader))


APPEND_FIELDS = ("range", "payloadType", "origin", "version", "metadata")


@settings(max_examples=1000)
@given(append_headers, st.data())
def test_the_plain_reading_agrees_with_the_checked_one(
    header: AppendHeader, data: st.DataObject
) -> None:
    """`plain_append` and `plain_append_text` (the fast paths) answer what
    `checked_action_header` does, or leave the header to it: for written Appends and for any of
    their fields replaced (or removed) by any JSON, or another action's name added."""
    obj = orjson.loads(encode(header))
    body = obj["append"]
    for _ in range(data.draw(st.integers(0, 2))):
        places = [(obj, ("append", "delete")), (body, APPEND_FIELDS)]
        places.append((body["range"], ("from", "to")))
        target, keys = data.draw(st.sampled_from(places))
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.booleans()):
            target[key] = data.draw(st.one_of(st.sampled_from(["json", "binary", 1]), json_values))
        else:
            target.pop(key, None)
        if type(body.get("range")) is not dict:
            break  # nothing left to change in it
    try:
        checked: ActionHeader | DecodeError | None = checked_action_header(obj)
    except DecodeError as error:
        checked = error
    plain = plain_append(obj)
    assert plain is None or plain == checked, (plain, checked)
    plain_text = plain_append_text(orjson.dumps(obj))
    assert plain_text is None or plain_text == checked, (plain_text, checked)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("Append-")))
def test_a_record_with_our_headers_reads_as_the_vector(vectors: Path, name: str) -> None:
    """Our headers (journal/client/conditional.py) ride beside the vector's `journal.action`: the
    action is the vector's, and they are plain user headers, as kafka-journal keeps them."""
    ours = Idempotency("retry-1", "0" * 64).headers()
    record = RawRecord(
        topic="t",
        partition=0,
        offset=7,
        timestamp_ms=0,
        key=b"j",
        value=b"",
        headers=[
            (ACTION_HEADER, (vectors / name).read_bytes()),
            *((k, v.encode()) for k, v in ours.items()),
        ],
    )
    action = parse(record)
    assert action is not None
    assert action.header == EXPECTED[name][0]
    assert action.headers == ours
    assert set(ours) == CONDITIONAL_HEADERS


def test_a_repeated_append_header_decodes_to_the_same_header() -> None:
    raw = b'{"append":{"range":{"from":3,"to":4},"payloadType":"json","metadata":{}}}'
    first, again = decode(raw), decode(bytes(raw))
    assert first == again
    assert isinstance(first, AppendHeader) and first.range == SeqRange(3, 4)


def test_append_headers_with_metadata_data_are_not_shared() -> None:
    raw = b'{"append":{"range":{"from":1,"to":1},"payloadType":"json","metadata":{"data":{"a":1}}}}'
    first, again = decode(raw), decode(raw)
    assert isinstance(first, AppendHeader) and isinstance(again, AppendHeader)
    assert first == again and first.metadata.data is not again.metadata.data
