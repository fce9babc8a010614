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
"""

from journal.codec.action_header import ACTION_HEADER, decode_action_header, encode_action_header
from journal.codec.errors import DecodeError, EncodeError
from journal.codec.events import decode_events, encode_events

__all__ = [
    "ACTION_HEADER",
    "DecodeError",
    "EncodeError",
    "decode_action_header",
    "decode_events",
    "encode_action_header",
    "encode_events",
]
