"""kafka-journal's wire format: the `journal.action` header and an Append's record value.

Byte-compatible with evolution-gaming/kafka-journal, so that either side can read what the other
writes. Decoders raise DecodeError (and nothing else) on bad input; encoders raise EncodeError
for values the format cannot carry.

- `encode_action_header` / `decode_action_header`: the header JSON; None means an action this
  version does not know, to be skipped.
- `encode_events` / `decode_events`: the record value of an Append, binary when any payload is
  binary and JSON otherwise; older forms (v0 binary, JSON without metadata) are read too.
- `journal.codec.actions`: a Kafka record (`RawRecord`) to an action and back.

Imports `journal.core.model` and `journal.errors` only: no I/O.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

if TYPE_CHECKING:
    from journal.codec.action_header import (
        ACTION_HEADER,
        decode_action_header,
        encode_action_header,
    )
    from journal.codec.actions import (
        MalformedRecord,
        RawRecord,
        events_of,
        parse_checked,
        record_headers,
    )
    from journal.codec.duration import FiniteDuration, TimeUnit, from_nanos, parse_duration
    from journal.codec.envelope import (
        APPEND_REF,
        EnvelopeRefused,
        OpenedAppend,
        Opener,
        Sealer,
        data_key_id,
        is_append_envelope,
        new_data_key,
        new_kek_text,
        seal,
    )
    from journal.codec.errors import DecodeError, EncodeError
    from journal.codec.events import decode_events, encode_events

_DOOR = {
    "ACTION_HEADER": "action_header",
    "APPEND_REF": "envelope",
    "DecodeError": "errors",
    "EncodeError": "errors",
    "EnvelopeRefused": "envelope",
    "FiniteDuration": "duration",
    "MalformedRecord": "actions",
    "Opener": "envelope",
    "OpenedAppend": "envelope",
    "RawRecord": "actions",
    "Sealer": "envelope",
    "TimeUnit": "duration",
    "data_key_id": "envelope",
    "decode_action_header": "action_header",
    "decode_events": "events",
    "encode_action_header": "action_header",
    "encode_events": "events",
    "events_of": "actions",
    "from_nanos": "duration",
    "is_append_envelope": "envelope",
    "new_data_key": "envelope",
    "new_kek_text": "envelope",
    "parse_checked": "actions",
    "parse_duration": "duration",
    "record_headers": "actions",
    "seal": "envelope",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "ACTION_HEADER",
    "APPEND_REF",
    "DecodeError",
    "EncodeError",
    "EnvelopeRefused",
    "FiniteDuration",
    "MalformedRecord",
    "OpenedAppend",
    "Opener",
    "RawRecord",
    "Sealer",
    "TimeUnit",
    "data_key_id",
    "decode_action_header",
    "decode_events",
    "encode_action_header",
    "encode_events",
    "events_of",
    "from_nanos",
    "is_append_envelope",
    "new_data_key",
    "new_kek_text",
    "parse_checked",
    "parse_duration",
    "record_headers",
    "seal",
]
