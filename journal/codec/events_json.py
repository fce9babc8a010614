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
    decoded = loads(value, _WHERE)
    plain = plain_events(decoded)
    return checked_events(decoded) if plain is None else plain


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


_NO_TAGS: frozenset[str] = frozenset()
_TAG_SETS: dict[tuple[str, ...], frozenset[str]] = {}  # events of a topic share few tag lists
_TAG_SETS_MAX = 4096


def plain_events(decoded: Json) -> Events | None:
    """The value as `decode_events_json` reads it, when it has the shape this project and
    kafka-journal write (every field of the expected type); None for anything else, which the
    validating reader then reads, or names the fault of. Every record a subscription,
    replication or read decodes comes here: a few type checks and lookups per event instead
    of a checked read of every field.
    """
    if type(decoded) is not dict:
        return None
    raw_events = decoded.get("events")
    if type(raw_events) is not list or not raw_events:
        return None
    events: list[Event] = []
    for raw in raw_events:
        if type(raw) is not dict:
            return None
        seq_nr = raw.get("seqNr")
        tags = raw.get("tags")
        if type(seq_nr) is not int or type(tags) is not list:
            return None
        tag_set = _tag_set(tags) if tags else _NO_TAGS
        if tag_set is None:
            return None
        payload_type = raw.get("payloadType")
        value = raw.get("payload")
        payload: Payload | None
        if payload_type is None or payload_type == "json":
            payload = None if value is None else JsonPayload(value)  # null: none, as Event says
        elif payload_type == "text" and type(value) is str:
            payload = TextPayload(value)
        elif payload_type == "text" and "payload" not in raw:
            payload = None
        else:
            return None
        events.append(Event(seq_nr, tag_set, payload))  # checks the seqNr's range
    metadata = decoded.get("metadata")
    if metadata is None:
        return Events(tuple(events))
    return Events(tuple(events), payload_metadata_from_json(metadata, f"{_WHERE}.metadata"))


def _tag_set(tags: list[Json]) -> frozenset[str] | None:
    """The tags as a set, shared between events with the same list; None unless strings."""
    key = cast("tuple[str, ...]", tuple(tags))  # strings once found in the cache, or checked
    try:
        return _TAG_SETS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable element: not a string
        return None
    if not all(type(tag) is str for tag in key):
        return None
    if len(_TAG_SETS) >= _TAG_SETS_MAX:
        _TAG_SETS.clear()
    tag_set = _TAG_SETS[key] = frozenset(key)
    return tag_set


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
