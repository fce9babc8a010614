"""How the library's stored events and tracking positions travel as journal events.

An aggregate's events are the journal `str(originator_id)`. Each event is a JSON payload with
the library's version, topic and state (base64: the state is whatever bytes the library's
mapper made, compressed or enciphered ones included) and whether the id was a UUID, so a read
returns the id with the type it was written with. The journal's seqNrs are the versions moved
so that an aggregate's first version is seqNr 1 (the fold's rule: a new journal starts at 1;
the library's aggregates start at any version, 1 by default, 0 in some of its tests):
`seq_nr_of`, the one mapping, for events and snapshots alike.

A snapshot (the library's stored event of an aggregate's state at a version) is the journal's
snapshot at that version's seqNr, with a binary payload: the same fields but the state as a
JSON line, then the state's bytes as they are (a snapshot may be megabytes: no base64).

A tracking position rides in the record headers of the events it was recorded with
(`eventsourcing.tracking`: `[application name, notification id]`), so the events and their
position are accepted or rejected together, by the one fold, as one record. A position
recorded without events is the only event of a record of the tracking journal
`eventsourcing.tracking:<application name>`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.persistence import StoredEvent, Tracking

from journal import BinaryPayload, Event, EventRecord, JsonPayload, Payload
from journal.core import Json

TRACKING_HEADER = "eventsourcing.tracking"
TRACKING_JOURNAL_PREFIX = "eventsourcing.tracking:"


def journal_id_of(originator_id: UUID | str) -> str:
    return str(originator_id)


def tracking_journal_id(application_name: str) -> str:
    return TRACKING_JOURNAL_PREFIX + application_name


def tracking_headers(tracking: Tracking | None) -> dict[str, str]:
    if tracking is None:
        return {}
    return {TRACKING_HEADER: json.dumps([tracking.application_name, tracking.notification_id])}


def tracking_of(headers: Mapping[str, str]) -> Tracking | None:
    """The tracking position a record's headers carry, if any (malformed: none)."""
    raw = headers.get(TRACKING_HEADER)
    if raw is None:
        return None
    try:
        name, notification_id = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(name, str) or not isinstance(notification_id, int):
        return None
    return Tracking(name, notification_id)


def seq_nr_of(version: int, base: int) -> int:
    """The seqNr of an aggregate's `version` in its journal, `base` its version at seqNr 1."""
    return version - base + 1


def _fields(stored: StoredEvent) -> dict[str, Json]:
    return {
        "version": stored.originator_version,
        "topic": stored.topic,
        "uuid": isinstance(stored.originator_id, UUID),
    }


def encode_event(stored: StoredEvent, seq_nr: int) -> Event:
    state = base64.b64encode(stored.state).decode("ascii")
    return Event(seq_nr, payload=JsonPayload.of({**_fields(stored), "state": state}))


def encode_snapshot(stored: StoredEvent) -> BinaryPayload:
    # compact JSON escapes every newline inside strings: the first b"\n" ends the fields
    return BinaryPayload(json.dumps(_fields(stored)).encode() + b"\n" + stored.state)


def decode_snapshot(journal_id: str, payload: Payload) -> StoredEvent | None:
    """The stored event `encode_snapshot` made `payload` of; None for another writer's."""
    if not isinstance(payload, BinaryPayload):
        return None
    fields, newline, state = payload.value.partition(b"\n")
    try:
        value = json.loads(fields) if newline else None
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return _stored_of(journal_id, value, state)


def tracking_event(tracking: Tracking, seq_nr: int) -> Event:
    return Event(seq_nr, payload=JsonPayload.of({"tracking": tracking.notification_id}))


@dataclass(frozen=True, slots=True)
class Decoded:
    """A stored event read back, with the seqNr it has in its journal."""

    stored: StoredEvent
    seq_nr: int

    @property
    def base(self) -> int:
        """The version of the aggregate's seqNr 1 (`seq_nr_of` turned round)."""
        return self.stored.originator_version - self.seq_nr + 1


def decode_event(journal_id: str, record: EventRecord) -> Decoded | None:
    """The stored event in `record`; None for an event not written by this module."""
    payload = record.event.payload
    if not isinstance(payload, JsonPayload):
        return None
    fields = payload.value
    if not isinstance(fields, dict):
        return None
    state = fields.get("state")
    if not isinstance(state, str):
        return None
    try:
        data = base64.b64decode(state, validate=True)
    except ValueError:
        return None
    stored = _stored_of(journal_id, fields, data)
    return None if stored is None else Decoded(stored, record.seq_nr)


def _stored_of(journal_id: str, fields: dict[str, Json], state: bytes) -> StoredEvent | None:
    version, topic = fields.get("version"), fields.get("topic")
    if isinstance(version, bool) or not isinstance(version, int) or not isinstance(topic, str):
        return None
    try:
        originator_id: UUID | str = UUID(journal_id) if fields.get("uuid") is True else journal_id
    except ValueError:
        return None
    return StoredEvent(originator_id, version, topic, state)
