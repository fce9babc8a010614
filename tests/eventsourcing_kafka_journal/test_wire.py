"""The snapshot payload: the library's stored event through a binary payload and back."""

from __future__ import annotations

from uuid import uuid4

from eventsourcing.persistence import StoredEvent

from eventsourcing_kafka_journal.wire import decode_snapshot, encode_snapshot
from journal.core.model import BinaryPayload, JsonPayload


def test_a_snapshot_payload_returns_the_stored_event_with_its_id_type_and_raw_state() -> None:
    aggregate = uuid4()
    state = b'{"a": 1}\n\x00\xff\n'  # newlines and non-UTF-8 bytes: kept as they are
    for stored in (
        StoredEvent(aggregate, 7, "app:Counter.Snapshot\nx", state),
        StoredEvent("order-1", 0, "t", b""),
    ):
        payload = encode_snapshot(stored)
        assert payload.value.endswith(stored.state)
        assert decode_snapshot(str(stored.originator_id), payload) == stored


def test_another_writers_snapshot_payload_is_not_a_stored_event() -> None:
    for payload in (
        JsonPayload.of({"version": 1, "topic": "t", "uuid": False}),
        BinaryPayload(b"no fields"),
        BinaryPayload(b'["version"]\nstate'),
        BinaryPayload(b'{"version": true, "topic": "t"}\nstate'),
        BinaryPayload(b'{"version": 1, "topic": "t", "uuid": true}\nstate'),  # id not a UUID
    ):
        assert decode_snapshot("order-1", payload) is None
