"""What a subscription cannot open as it decodes (docs/erasure.md): decoded without the key,
the events it passes by are exactly those it passed by when it opened each event after the
decode (`_unopened`). In memory: the servers' paths are in tests/journal/test_erasure.py."""

from __future__ import annotations

from datetime import UTC, datetime

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from journal.codec.envelope import Opener, Sealer, data_key_id, new_data_key, seal
from journal.codec.events_binary import decode_events_binary, encode_events_binary
from journal.core.model import Event, EventRecord, Events, TextPayload
from journal.subscriptions.subscription import UNREADABLE, _unopened

_AT = datetime(2026, 11, 29, tzinfo=UTC)
_CLEAR = [Event(1, payload=TextPayload("a")), Event(2), Event(3, payload=TextPayload("b"))]


def opener_and_sealer() -> tuple[Opener, Sealer, AESGCM]:
    key = new_data_key()
    cipher = AESGCM(key)
    key_id = data_key_id(key)
    return Opener(cipher, "j", key_id=key_id), Sealer(cipher, "j", key_id=key_id), cipher


def decoded(events: list[Event]) -> list[EventRecord]:
    """The Append's records as a subscription decodes them without the key."""
    value = encode_events_binary(Events(tuple(events)))
    return [EventRecord(e, _AT, 0, 7) for e in decode_events_binary(value).events]


def test_an_erased_journal_s_events_are_all_passed_by() -> None:
    _, sealer, _ = opener_and_sealer()
    records = decoded(list(sealer.events(_CLEAR)))
    events, passed = _unopened(records, UNREADABLE)
    assert events == records and passed == range(3)  # with a payload or not


def test_without_a_key_sealed_payloads_are_passed_by_and_plain_ones_delivered() -> None:
    _, sealer, _ = opener_and_sealer()
    assert _unopened(decoded(list(sealer.events(_CLEAR))), None)[1] == [0, 2]
    plain = decoded(_CLEAR)
    assert _unopened(plain, None) == (plain, [])


def test_an_envelope_refused_as_a_whole_is_opened_event_by_event() -> None:
    opener, sealer, cipher = opener_and_sealer()
    other, _, _ = opener_and_sealer()
    # sealed by another key: every payload refused, the event without one delivered
    assert _unopened(decoded(list(sealer.events(_CLEAR))), other)[1] == [0, 2]
    # version 1, one envelope an event, the second moved to another seqNr: only it is refused
    one_by_one = [
        Event(1, payload=seal(cipher, "j", 1, TextPayload("a"))),
        Event(2, payload=seal(cipher, "j", 9, TextPayload("x"))),
        Event(3, payload=seal(cipher, "j", 3, TextPayload("b"))),
    ]
    events, passed = _unopened(decoded(one_by_one), opener)
    assert passed == [1]
    assert [events[0].event.payload, events[2].event.payload] == [
        TextPayload("a"),
        TextPayload("b"),
    ]
