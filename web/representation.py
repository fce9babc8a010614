"""The core's answers as the API's JSON: events (one NDJSON line each), info, positions.

An event line: `{"seqNr", "payload" | "payloadText" | "payloadBinary" (base64) | none, "tags"
(sorted), "timestamp" (ISO 8601 UTC, milliseconds: Kafka's precision), "partition", "offset",
"metadata"? (the append's metadata, when it has some), "expireAfter"? (ISO 8601),
"headers"? (when the append had some)}`. Optional fields are omitted rather than null; a JSON
null payload reads back as none, as in kafka-journal (see `journal.model.Event`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime

import orjson
from aiohttp import web

from journal.journals import Deleted, JournalInfo
from journal.model import (
    BinaryPayload,
    EventRecord,
    Json,
    JsonPayload,
    Payload,
    Position,
    TextPayload,
)
from web.duration import expire_after_to_iso

JsonObject = dict[str, Json]


def payload_fields(payload: Payload | None) -> JsonObject:
    """An event's payload as the API writes it: one of payload, payloadText, payloadBinary."""
    match payload:
        case JsonPayload(value):
            return {"payload": value}
        case TextPayload(text):
            return {"payloadText": text}
        case BinaryPayload(raw):
            return {"payloadBinary": base64.b64encode(raw).decode("ascii")}
        case None:
            return {}


def event_json(record: EventRecord) -> JsonObject:
    event = record.event
    obj: JsonObject = {"seqNr": event.seq_nr, **payload_fields(event.payload)}
    obj["tags"] = list[Json](sorted(event.tags))
    obj["timestamp"] = iso_timestamp(record.timestamp)
    obj["partition"] = record.partition
    obj["offset"] = record.offset
    if record.metadata.data is not None:
        obj["metadata"] = record.metadata.data
    expire_after = record.metadata.expire_after
    iso_expire_after = None if expire_after is None else expire_after_to_iso(expire_after)
    if iso_expire_after is not None:
        obj["expireAfter"] = iso_expire_after
    if record.headers:
        obj["headers"] = dict[str, Json](record.headers)
    return obj


def event_line(record: EventRecord) -> bytes:
    """One NDJSON line (newline included)."""
    return orjson.dumps(event_json(record), option=orjson.OPT_APPEND_NEWLINE)


def info_json(journal_id: str, info: JournalInfo) -> JsonObject:
    return {"id": journal_id, "seqNr": info.seq_nr, "deleteTo": info.delete_to}


def position_json(position: Position) -> JsonObject:
    return {"partition": position.partition, "offset": position.offset}


def deleted_json(deleted: Deleted) -> JsonObject:
    obj: JsonObject = {"deleteTo": deleted.delete_to}
    if deleted.position is not None:
        obj.update(position_json(deleted.position))
    return obj


def iso_timestamp(timestamp: datetime) -> str:
    if timestamp.tzinfo is None:  # the store's rows are UTC without saying so
        timestamp = timestamp.replace(tzinfo=UTC)
    text = timestamp.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


def json_response(obj: Mapping[str, Json], status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(obj), content_type="application/json")
