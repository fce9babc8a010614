"""The core's answers as the API's models (`web.schema`): events, info, positions.

An event line: `{"seqNr", "payload" | "payloadText" | "payloadBinary" (base64) | none, "tags"
(sorted), "timestamp" (ISO 8601 UTC, milliseconds: Kafka's precision), "partition", "offset",
"metadata"? (the append's metadata, when it has some), "expireAfter"? (ISO 8601),
"headers"? (when the append had some)}`. Optional fields are omitted rather than null; a JSON
null payload reads back as none, as in kafka-journal (see `journal.core.model.Event`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec
import orjson
from aiohttp import web
from pydantic import BaseModel

from journal import (
    Appended,
    BinaryPayload,
    Deleted,
    EventRecord,
    Heartbeat,
    JournalIdPage,
    JournalInfo,
    JsonPayload,
    Payload,
    Position,
    SubscriptionPosition,
    TextPayload,
)
from journal.subscriptions import GroupEvent, GroupStatus, SubscriptionItem
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


def event_line(record: EventRecord) -> bytes:
    """One NDJSON line (newline included)."""
    return EventLines().line(record)


def subscription_line(item: SubscriptionItem) -> bytes:
    """One NDJSON line of a subscription: an event with its journal id and position, or a
    heartbeat."""
    return SubscriptionLines().line(item)


_NEWLINES = re.compile(rb"[\r\n]")


def _payload_entry(payload: Payload | None) -> tuple[str, object] | None:
    """An event's payload as a line's field: a JSON payload's text embedded as it is (it was
    checked where it entered); a newline between its tokens would end the line, so it goes."""
    match payload:
        case JsonPayload(raw):
            if b"\n" in raw or b"\r" in raw:  # JSON strings hold none: they are whitespace
                raw = _NEWLINES.sub(b" ", raw)
            return "payload", orjson.Fragment(raw)
        case TextPayload(text):
            return "payloadText", text
        case BinaryPayload(raw):
            return "payloadBinary", base64.b64encode(raw).decode("ascii")
        case None:
            return None


class EventLines:
    """Event lines as a read writes them, in the field order of `schema.EventOut`: what the
    events of one Append share (timestamp, partition, offset, metadata, headers) is made once
    per Append, and a line is written by orjson from values the core checked already."""

    def __init__(self) -> None:
        self._append: tuple[int, int] | None = None
        self._shared: dict[str, Any] = {}
        # the store's reads give the events of a page with equal tags one frozenset: sorted once
        self._tags: frozenset[str] = frozenset()
        self._sorted_tags: list[str] = []

    def line(self, record: EventRecord) -> bytes:
        return orjson.dumps(self.fields(record), option=orjson.OPT_APPEND_NEWLINE)

    def lines(self, records: Iterable[EventRecord]) -> bytes:
        """The lines of `records`, joined: one write."""
        return b"".join([self.line(record) for record in records])

    def fields(self, record: EventRecord) -> dict[str, Any]:
        event = record.event
        fields: dict[str, Any] = {"seqNr": event.seq_nr}
        payload = _payload_entry(event.payload)
        if payload is not None:
            fields[payload[0]] = payload[1]
        tags = event.tags
        if tags is not self._tags:
            self._tags, self._sorted_tags = tags, sorted(tags)
        fields["tags"] = self._sorted_tags
        append = (record.partition, record.offset)
        if append != self._append:
            self._append, self._shared = append, _append_fields(record)
        fields.update(self._shared)
        return fields


def _append_fields(record: EventRecord) -> dict[str, Any]:
    """The fields of an event line that every event of its Append shares."""
    shared: dict[str, Any] = {
        "timestamp": iso_timestamp(record.timestamp),
        "partition": record.partition,
        "offset": record.offset,
    }
    data = record.metadata.data
    if data is not None:  # msgspec: orjson refuses integers beyond 64 bits
        shared["metadata"] = orjson.Fragment(msgspec.json.encode(data))
    expire_after = record.metadata.expire_after
    iso_expire_after = None if expire_after is None else expire_after_to_iso(expire_after)
    if iso_expire_after is not None:
        shared["expireAfter"] = iso_expire_after
    if record.headers:
        shared["headers"] = dict(record.headers)
    return shared


NDJSON = "application/x-ndjson"
EVENT_STREAM = "text/event-stream"


class SubscriptionFrames(Protocol):
    """How a subscription's items are written: NDJSON lines or server-sent events."""

    content_type: str

    def line(self, item: SubscriptionItem) -> bytes: ...


class SubscriptionLines:
    """Lines of one subscription's stream, as they come: an event's line as a read writes it
    (`EventLines`) with its journal's `id` and `position` (each position encoded once: an
    Append's events share one but the last), in the field order of
    `schema.SubscribedEventOut`; a heartbeat's line."""

    content_type = NDJSON

    def __init__(self) -> None:
        self._events = EventLines()
        self._position: SubscriptionPosition | None = None
        self._encoded = ""

    def line(self, item: SubscriptionItem) -> bytes:
        if item.position is not self._position:
            self._position, self._encoded = item.position, item.position.encode()
        if isinstance(item, Heartbeat):
            heartbeat = {"heartbeat": True, "position": self._encoded}
            return orjson.dumps(heartbeat, option=orjson.OPT_APPEND_NEWLINE)
        fields = self._events.fields(item.record)
        fields["id"] = item.key.id
        fields["position"] = self._encoded
        return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)

    @property
    def position(self) -> str:
        """The encoded position of the last item written."""
        return self._encoded


class SubscriptionEvents:
    """A subscription as server-sent events: an event's line (`SubscriptionLines`) as the
    `data:` of an SSE event whose `id:` is its position, so an EventSource reconnects with
    `Last-Event-ID` set to it; a heartbeat as a comment (`: hb`) followed by an `id:` alone,
    which moves the client's last event id on without firing an event. Positions are
    base64url and lines are single JSON lines, so neither can break the framing."""

    content_type = EVENT_STREAM

    def __init__(self) -> None:
        self._lines = SubscriptionLines()

    def line(self, item: SubscriptionItem) -> bytes:
        encoded = self._lines.line(item)  # also encodes the position, once per position
        position = self._lines.position.encode("ascii")
        if isinstance(item, Heartbeat):
            return sse_heartbeat(position)
        return sse_event(position, encoded)


def sse_event(event_id: bytes, line: bytes) -> bytes:
    """One server-sent event: `id:`, then `line` (a single JSON line, its newline included)
    as its `data:`."""
    return b"id: %s\ndata: %s\n" % (event_id, line)


def sse_heartbeat(event_id: bytes | None) -> bytes:
    """A heartbeat as the comment `: hb`, which fires no event; with an `id:` alone, which
    moves the client's last event id on."""
    return b": hb\n\n" if event_id is None else b": hb\nid: %s\n\n" % event_id


def group_line(event: GroupEvent) -> bytes:
    """One NDJSON line of a group member's stream: an event as a subscription writes it, its
    `position` the event's (`EventPosition`: what the member acknowledges)."""
    return _group_line(event, event.position.encode())


def _group_line(event: GroupEvent, position: str) -> bytes:
    fields = EventLines().fields(event.record)
    fields["id"] = event.key.id
    fields["position"] = position
    return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)


GROUP_HEARTBEAT = b'{"heartbeat":true}\n'


def group_lines(batch: Sequence[GroupEvent]) -> bytes:
    """A member's batch as NDJSON: its events' lines (`group_line`), a heartbeat if empty."""
    return b"".join([group_line(event) for event in batch]) if batch else GROUP_HEARTBEAT


def group_event_stream(batch: Sequence[GroupEvent]) -> bytes:
    """A member's batch as server-sent events: each event's line as `data:` with its event
    position as `id:` (what an ack names), a heartbeat comment if empty. No heartbeat `id:`:
    a group has no position of its own to resume from."""
    if not batch:
        return sse_heartbeat(None)
    events = []
    for event in batch:
        position = event.position.encode()
        events.append(sse_event(position.encode("ascii"), _group_line(event, position)))
    return b"".join(events)


def groups_out(statuses: Iterable[GroupStatus]) -> schema.GroupsOut:
    return schema.GroupsOut(
        groups=[
            schema.GroupOut(
                name=status.name,
                state=status.state,
                partitions=[
                    schema.GroupPartitionOut(
                        partition=p.partition,
                        topic=p.topic,
                        topicPartition=p.topic_partition,
                        checkpoint=p.committed,
                        end=p.end,
                        lag=p.lag,
                        member=p.member,
                    )
                    for p in status.partitions
                ],
            )
            for status in statuses
        ]
    )


def info_out(journal_id: str, info: JournalInfo) -> schema.JournalInfoOut:
    return schema.JournalInfoOut(id=journal_id, seqNr=info.seq_nr, deleteTo=info.delete_to)


def ids_out(page: JournalIdPage) -> schema.JournalIdPageOut:
    return schema.JournalIdPageOut(journals=list(page.ids), next=page.next)


def position_out(position: Position) -> schema.PositionOut:
    return schema.PositionOut(partition=position.partition, offset=position.offset)


def appended_json(appended: Appended) -> bytes:
    """An append's answer (`schema.AppendedOut`), written directly: every append's."""
    seq_nrs = appended.seq_nrs
    return b'{"partition":%d,"offset":%d,"seqNr":{"from":%d,"to":%d}}' % (
        appended.partition,
        appended.offset,
        seq_nrs.from_,
        seq_nrs.to,
    )


def appended_response(appended: Appended) -> web.Response:
    return web.Response(body=appended_json(appended), content_type="application/json")


def deleted_out(deleted: Deleted) -> schema.DeletedOut:
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
