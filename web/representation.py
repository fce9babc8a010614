"""The core's answers as the API's models (`web.schema`): events, info, positions.

An event line: `{"seqNr", "payload" | "payloadText" | "payloadBinary" (base64) | none, "tags"
(sorted), "timestamp" (ISO 8601 UTC, milliseconds: Kafka's precision), "partition", "offset",
"metadata"? (the append's metadata, when it has some), "expireAfter"? (ISO 8601),
"headers"? (when the append had some)}`. Optional fields are omitted rather than null; a JSON
null payload reads back as none, as in kafka-journal (see `journal.core.model.Event`).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web
from pydantic import BaseModel

from journal.client import journals, listing
from journal.core import model
from journal.core.model import BinaryPayload, EventRecord, JsonPayload, Payload, TextPayload
from journal.kafka.subscription import Heartbeat, SubscriptionItem, SubscriptionPosition
from web import schema
from web.duration import expire_after_to_iso


def payload_fields(payload: Payload | None) -> dict[str, Any]:
    """An event's payload as the API writes it: one of payload, payloadText, payloadBinary."""
    match payload:
        case JsonPayload():
            return {"payload": payload.value}
        case TextPayload(text):
            return {"payloadText": text}
        case BinaryPayload(raw):
            return {"payloadBinary": base64.b64encode(raw).decode("ascii")}
        case None:
            return {}


def event_out(record: EventRecord) -> schema.EventOut:
    return schema.EventOut(**_event_fields(record))


def _event_fields(record: EventRecord) -> dict[str, Any]:
    return {**_own_fields(record.event), **_append_fields(record)}


def _own_fields(event: model.Event) -> dict[str, Any]:
    """The fields of an event line that are the event's own: seqNr, payload, tags."""
    return {"seqNr": event.seq_nr, **payload_fields(event.payload), "tags": sorted(event.tags)}


def _append_fields(record: EventRecord) -> dict[str, Any]:
    """The fields of an event line that every event of its Append shares."""
    optional: dict[str, Any] = {}
    if record.metadata.data is not None:
        optional["metadata"] = record.metadata.data
    expire_after = record.metadata.expire_after
    iso_expire_after = None if expire_after is None else expire_after_to_iso(expire_after)
    if iso_expire_after is not None:
        optional["expireAfter"] = iso_expire_after
    if record.headers:
        optional["headers"] = dict(record.headers)
    return {
        "timestamp": iso_timestamp(record.timestamp),
        "partition": record.partition,
        "offset": record.offset,
        **optional,
    }


def event_line(record: EventRecord) -> bytes:
    """One NDJSON line (newline included)."""
    return schema.to_json(event_out(record)) + b"\n"


def subscription_line(item: SubscriptionItem) -> bytes:
    """One NDJSON line of a subscription: an event with its journal id and position, or a
    heartbeat."""
    if isinstance(item, Heartbeat):
        heartbeat = schema.HeartbeatOut(heartbeat=True, position=item.position.encode())
        return schema.to_json(heartbeat) + b"\n"
    fields = _event_fields(item.record)
    line = schema.SubscribedEventOut(id=item.key.id, position=item.position.encode(), **fields)
    return schema.to_json(line) + b"\n"


class SubscriptionLines:
    """`subscription_line` for the items of one stream, as they come: what the events of one
    Append share (id, timestamp, metadata, headers...) and each position's encoding are made
    once, and a line is written by orjson from values the core checked already, in the
    field order of `schema.SubscribedEventOut`, rather than validated again per event."""

    def __init__(self) -> None:
        self._append: tuple[model.JournalKey, int, int] | None = None
        self._shared: dict[str, Any] = {}
        self._position: SubscriptionPosition | None = None
        self._encoded = ""

    def line(self, item: SubscriptionItem) -> bytes:
        if isinstance(item, Heartbeat):
            return subscription_line(item)
        record = item.record
        append = (item.key, record.partition, record.offset)
        if append != self._append:
            self._append, self._shared = append, {**_append_fields(record), "id": item.key.id}
        if item.position is not self._position:  # an Append's events share one but the last
            self._position, self._encoded = item.position, item.position.encode()
        fields = {**_own_fields(record.event), **self._shared, "position": self._encoded}
        try:
            return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError:  # a number beyond 64 bits in a payload: pydantic's
            return subscription_line(item)


def info_out(journal_id: str, info: journals.JournalInfo) -> schema.JournalInfoOut:
    return schema.JournalInfoOut(id=journal_id, seqNr=info.seq_nr, deleteTo=info.delete_to)


def ids_out(page: listing.JournalIdPage) -> schema.JournalIdPageOut:
    return schema.JournalIdPageOut(journals=list(page.ids), next=page.next)


def position_out(position: model.Position) -> schema.PositionOut:
    return schema.PositionOut(partition=position.partition, offset=position.offset)


def deleted_out(deleted: journals.Deleted) -> schema.DeletedOut:
    if deleted.position is None:
        return schema.DeletedOut(deleteTo=deleted.delete_to)
    return schema.DeletedOut(
        deleteTo=deleted.delete_to,
        partition=deleted.position.partition,
        offset=deleted.position.offset,
    )


def iso_timestamp(timestamp: datetime) -> str:
    if timestamp.tzinfo is None:  # the store's rows are UTC without saying so
        timestamp = timestamp.replace(tzinfo=UTC)
    text = timestamp.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


def json_response(answer: BaseModel, status: int = 200) -> web.Response:
    return web.Response(status=status, body=schema.to_json(answer), content_type="application/json")
