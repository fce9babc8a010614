"""The record value of an Append whose payloadType is json (kafka-journal's `PayloadJson`).

    {"events": [{"seqNr": 1, "tags": ["0", "1"], "payloadType": "json", "payload": <JSON>},
                {"seqNr": 2, "tags": [], "payloadType": "text", "payload": "<string>"},
                {"seqNr": 3, "tags": []}],
     "metadata": {"expireAfter": "1 day", "data": <JSON>}}

Only events without a payload or with a JSON or text payload fit; a text payload travels as a
JSON string marked `"payloadType": "text"`. An event without `payloadType` is json, one without
`payload` has none, and neither has one with `"payload": null` (kafka-journal reads it so; see
`journal.model.Event`). `metadata` is always
written; the older v0 form has none and reads as empty metadata. Tags are written in
kafka-journal's order (see `journal.codec.tag_order`) and read as a set. These functions check
the shape only; seqNr order is checked by `journal.codec.events`.
"""

from __future__ import annotations

import functools
from typing import cast

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
from journal.model import (
    BinaryPayload,
    Event,
    Events,
    Json,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
)

_WHERE = "json record value"


def encode_events_json(events: Events) -> bytes:
    return dumps(
        {
            "events": [_event_to_json(event) for event in events.events],
            "metadata": payload_metadata_to_json(events.metadata),
        },
        _WHERE,
    )


def decode_events_json(value: bytes) -> Events:
    obj = expect_object(loads(value, _WHERE), _WHERE)
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


def _event_to_json(event: Event) -> dict[str, Json]:
    # the hot path of every append: exact-type checks first, `match` only for the rest
    payload = event.payload
    tags: list[Json] = list(_tags_in_order(event.tags))
    kind = type(payload)
    if kind is JsonPayload:
        return {
            "seqNr": event.seq_nr,
            "tags": tags,
            "payloadType": "json",
            "payload": cast(JsonPayload, payload).value,
        }
    obj: dict[str, Json] = {"seqNr": event.seq_nr, "tags": tags}
    match payload:
        case None:
            pass
        case JsonPayload(value):
            obj["payloadType"] = "json"
            obj["payload"] = value
        case TextPayload(text):
            obj["payloadType"] = "text"
            obj["payload"] = text
        case BinaryPayload():
            raise EncodeError(f"event {event.seq_nr} has a binary payload, which JSON cannot hold")
        case _:
            raise EncodeError(f"event {event.seq_nr} payload is not a Payload: {payload!r}")
    return obj


@functools.lru_cache(maxsize=4096)
def _tags_in_order(tags: frozenset[str]) -> tuple[str, ...]:
    """Cached: the events of a service carry few distinct tag sets, and the order of five or
    more tags costs a hash walk each time."""
    return tuple(scala_set_order(tags))


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
    return JsonPayload(cast(Json, value))  # whatever orjson decoded is a Json value
