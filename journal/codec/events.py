"""An Append's record value: Events in, (payloadType, bytes) out, and back.

kafka-journal's rule decides the format: binary (`journal.codec.events_binary`) when any event
has a binary payload, JSON (`journal.codec.events_json`) otherwise. The payloadType travels in
the action header, and `decode_events` needs it back to pick the decoder. Both directions insist
on a non-empty batch of consecutive seqNrs: EncodeError for a bad batch, DecodeError for bytes
that do not hold one.
"""

from __future__ import annotations

from journal.codec.envelope import Opener
from journal.codec.errors import DecodeError, EncodeError
from journal.codec.events_binary import decode_events_binary, encode_events_binary
from journal.codec.events_json import decode_events_json, encode_events_json
from journal.core.model import BinaryPayload, Events, InvalidValue, PayloadType, check_consecutive


def encode_events(events: Events) -> tuple[PayloadType, bytes]:
    try:
        check_consecutive(events.events)
    except InvalidValue as e:
        raise EncodeError(f"cannot encode events: {e}") from e
    return encode_checked_events(events)


def encode_checked_events(events: Events) -> tuple[PayloadType, bytes]:
    """`encode_events` of events whose range the caller checked already (`Events.range`)."""
    for event in events.events:  # a loop, not any() over a generator: every append asks
        if isinstance(event.payload, BinaryPayload):
            return PayloadType.BINARY, encode_events_binary(events)
    return PayloadType.JSON, encode_events_json(events)


def decode_events(payload_type: PayloadType, value: bytes, opener: Opener | None = None) -> Events:
    """The value's events; with an `opener`, their sealed payloads opened as they are built
    (`decode_events_binary`: a JSON value holds no envelope)."""
    try:
        if payload_type is PayloadType.BINARY:
            events = decode_events_binary(value, opener)
        elif payload_type is PayloadType.JSON:
            events = decode_events_json(value)
        else:
            raise DecodeError(f"a record value is binary or json, not {payload_type.value}")
        check_consecutive(events.events)
    except InvalidValue as e:
        raise DecodeError(f"{payload_type.value} record value: {e}") from e
    return events
