"""The record value of an Append whose payloadType is json (kafka-journal's `PayloadJson`).

    {"events": [{"seqNr": 1, "tags": ["0", "1"], "payloadType": "json", "payload": <JSON>},
                {"seqNr": 2, "tags": [], "payloadType": "text", "payload": "<string>"},
                {"seqNr": 3, "tags": []}],
     "metadata": {"expireAfter": "1 day", "data": <JSON>}}

Only events without a payload or with a JSON or text payload fit; a text payload travels as a
JSON string marked `"payloadType": "text"`. An event without `payloadType` is json, one without
`payload` has none, and neither has one with `"payload": null` (kafka-journal reads it so; see
`journal.core.model.Event`). `metadata` is always
written; the older v0 form has none and reads as empty metadata. Tags are written in
kafka-journal's order (see `journal.codec.tag_order`) and read as a set. These functions check
the shape only; seqNr order is checked by `journal.codec.events`.
"""

from __future__ import annotations

import functools
from typing import cast

import msgspec

from journal.codec.errors import DecodeError, EncodeError
from journal.codec.json_value import (
    dumps,
    expect_array,
    expect_int,
    expect_object,
    expect_str,
    field,
    loads,
    optional_str,
)
from journal.codec.payload_metadata import payload_metadata_from_json, payload_metadata_to_json
from journal.codec.tag_order import scala_set_order
from journal.core.model import (
    BinaryPayload,
    Event,
    Events,
    InvalidValue,
    Json,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
    json_payload,
    of_json,
)

_WHERE = "json record value"


def encode_events_json(events: Events) -> bytes:
    """The record value; each JSON payload's text is embedded as it is, not re-encoded.

    Written from a bytes template rather than through msgspec's walk of dicts: the fields and
    their order are fixed, the seqNrs are checked integers, and the tags' JSON is cached per
    tag set; the bytes are those of the compact encoding of the same object (a test holds
    both to each other). About half the CPU of the walk, on every append.
    """
    metadata = events.metadata
    metadata_json = (
        b"{}"
        if metadata == _NO_METADATA
        else dumps(payload_metadata_to_json(metadata), f"{_WHERE}.metadata")
    )
    lines = [_event_json(event) for event in events.events]
    return b'{"events":[%b],"metadata":%b}' % (b",".join(lines), metadata_json)


class _EventValue(msgspec.Struct, gc=False):
    """An event of the record value as this project and kafka-journal write it; the payload's
    JSON text is kept as it is (an empty Raw: no `payload` field)."""

    seqNr: int
    tags: tuple[str, ...]
    payloadType: str | None = None
    payload: msgspec.Raw = msgspec.Raw()


class _RecordValue(msgspec.Struct, gc=False):
    events: list[_EventValue]
    metadata: msgspec.Raw = msgspec.Raw()


_DECODER = msgspec.json.Decoder(_RecordValue)
_TEXT = msgspec.json.Decoder(str)
_NO_TAGS: frozenset[str] = frozenset()
_NO_METADATA = PayloadMetadata()
_NULL = b"null"
_NO_METADATA_TEXTS = (_NULL, b"{}")  # what every writer writes for none: no need to decode


def decode_events_json(value: bytes) -> Events:
    """Every record a subscription, replication or read decodes comes here: one pass of
    msgspec reads the envelope (seqNrs, tags, types) and only delimits each payload, whose
    text becomes the payload as it is. A value of any other shape is read again by the
    checked reader, which names its fault (or reads a form the fast one does not take)."""
    try:
        decoded = _DECODER.decode(value)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return checked_events(loads(value, _WHERE))
    events: list[Event] = []
    add = events.append
    tag_sets = _TAG_SETS
    # one loop, no call per event but the payload's: every event of every record passes here
    for raw in decoded.events:
        tags = raw.tags
        if not tags:
            tag_set = _NO_TAGS
        else:
            found = tag_sets.get(tags)
            tag_set = _tag_set(tags) if found is None else found
        payload_type = raw.payloadType
        text = raw.payload
        if payload_type is None or payload_type == "json":
            add(Event(raw.seqNr, tag_set, json_payload(bytes(text)) if text else None))
        elif payload_type != "text":
            return checked_events(loads(value, _WHERE))
        elif not text:
            add(Event(raw.seqNr, tag_set))
        else:
            try:
                add(Event(raw.seqNr, tag_set, TextPayload(_TEXT.decode(text))))
            except msgspec.DecodeError:
                return checked_events(loads(value, _WHERE))
    if not events:
        return checked_events(loads(value, _WHERE))
    raw_metadata = decoded.metadata
    if not raw_metadata or bytes(raw_metadata) in _NO_METADATA_TEXTS:
        return Events(tuple(events), _NO_METADATA)
    metadata = payload_metadata_from_json(loads(raw_metadata, _WHERE), f"{_WHERE}.metadata")
    return Events(tuple(events), metadata)


def checked_events(decoded: Json) -> Events:
    """The events of a decoded record value, every field checked: DecodeError names a fault."""
    obj = expect_object(decoded, _WHERE)
    raw_events = expect_array(field(obj, "events", _WHERE), f"{_WHERE}.events")
    metadata = obj.get("metadata")
    return Events(
        events=tuple(
            _event_from_json(raw, f"{_WHERE}.events[{i}]") for i, raw in enumerate(raw_events)
        ),
        metadata=(
            PayloadMetadata()
            if metadata is None
            else payload_metadata_from_json(metadata, f"{_WHERE}.metadata")
        ),
    )


_TAG_SETS: dict[tuple[str, ...], frozenset[str]] = {}  # events of a topic share few tag lists
_TAG_SETS_MAX = 4096


def _tag_set(tags: tuple[str, ...]) -> frozenset[str]:
    """The tags as a set, shared between events with the same tags."""
    tag_set = _TAG_SETS.get(tags)
    if tag_set is None:
        if len(_TAG_SETS) >= _TAG_SETS_MAX:
            _TAG_SETS.clear()
        tag_set = _TAG_SETS[tags] = frozenset(tags)
    return tag_set


def _event_json(event: Event) -> bytes:
    payload = event.payload
    tags = _tags_json(event.tags)
    if type(payload) is JsonPayload:  # the hot path of every append
        return b'{"seqNr":%d,"tags":%b,"payloadType":"json","payload":%b}' % (
            event.seq_nr,
            tags,
            payload.raw,
        )
    match payload:
        case None:
            return b'{"seqNr":%d,"tags":%b}' % (event.seq_nr, tags)
        case TextPayload(text):
            return b'{"seqNr":%d,"tags":%b,"payloadType":"text","payload":%b}' % (
                event.seq_nr,
                tags,
                _json_text(text),
            )
        case BinaryPayload():
            raise EncodeError(f"event {event.seq_nr} has a binary payload, which JSON cannot hold")
        case _:
            raise EncodeError(f"event {event.seq_nr} payload is not a Payload: {payload!r}")


def _json_text(text: str | tuple[str, ...]) -> bytes:
    try:
        return msgspec.json.encode(text)
    except UnicodeEncodeError as e:  # a lone surrogate
        raise EncodeError(f"{_WHERE} cannot be written: {e}") from e


@functools.lru_cache(maxsize=4096)
def _tags_json(tags: frozenset[str]) -> bytes:
    """The tags as a JSON array in kafka-journal's order. Cached: the events of a service
    carry few distinct tag sets, and the order of five or more tags costs a hash walk."""
    return _json_text(tuple(scala_set_order(tags)))


def _event_from_json(raw: object, where: str) -> Event:
    obj = expect_object(raw, where)
    tags = expect_array(field(obj, "tags", where), f"{where}.tags")
    return Event(
        seq_nr=expect_int(field(obj, "seqNr", where), f"{where}.seqNr"),
        tags=frozenset(expect_str(tag, f"{where}.tags[{i}]") for i, tag in enumerate(tags)),
        payload=_payload_from_json(obj, where),
    )


def _payload_from_json(obj: dict[str, object], where: str) -> Payload | None:
    payload_type = optional_str(obj, "payloadType", where)
    if payload_type is None:
        payload_type = "json"
    elif payload_type not in ("json", "text"):
        raise DecodeError(f"{where}.payloadType must be json or text, got {payload_type!r}")
    if "payload" not in obj:
        return None
    value = obj["payload"]
    if payload_type == "text":
        return TextPayload(expect_str(value, f"{where}.payload"))
    try:
        return of_json(cast(Json, value))  # whatever orjson decoded is a Json value
    except InvalidValue as e:
        raise DecodeError(f"{where}.payload: {e}") from e
