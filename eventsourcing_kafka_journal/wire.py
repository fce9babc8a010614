"""How the library's stored events and tracking positions travel as journal events.

An aggregate's events are the journal `str(originator_id)`. Each event is a JSON payload with
the library's version, topic and state (base64: the state is whatever bytes the library's
mapper made, compressed or enciphered ones included) and whether the id was a UUID, so a read
returns the id with the type it was written with. The journal's seqNrs are the versions moved
so that an aggregate's first version is seqNr 1 (the fold's rule: a new journal starts at 1;
the library's aggregates start at any version, 1 by default, 0 in some of its tests).

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

from journal.model import Event, EventRecord, JsonPayload

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


def encode_event(stored: StoredEvent, seq_nr: int) -> Event:
    return Event(
        seq_nr,
        payload=JsonPayload(
            {
                "version": stored.originator_version,
                "topic": stored.topic,
                "state": base64.b64encode(stored.state).decode("ascii"),
                "uuid": isinstance(stored.originator_id, UUID),
            }
        ),
    )


def tracking_event(tracking: Tracking, seq_nr: int) -> Event:
    return Event(seq_nr, payload=JsonPayload({"tracking": tracking.notification_id}))


@dataclass(frozen=True, slots=True)
class Decoded:
    """A stored event read back, with the seqNr it has in its journal."""

    stored: StoredEvent
    seq_nr: int

    @property
    def base(self) -> int:
        """The version of the aggregate's seqNr 1."""
        return self.stored.originator_version - self.seq_nr + 1


def decode_event(journal_id: str, record: EventRecord) -> Decoded | None:
    """The stored event in `record`; None for an event not written by this module."""
    payload = record.event.payload
    if not isinstance(payload, JsonPayload) or not isinstance(payload.value, dict):
        return None
    value = payload.value
    version, topic, state = value.get("version"), value.get("topic"), value.get("state")
    if not isinstance(version, int) or not isinstance(topic, str) or not isinstance(state, str):
        return None
    try:
        originator_id: UUID | str = UUID(journal_id) if value.get("uuid") is True else journal_id
        data = base64.b64decode(state, validate=True)
    except ValueError:
        return None
    return Decoded(StoredEvent(originator_id, version, topic, data), record.seq_nr)
