"""The codec's two failures: bytes that cannot be read, values that cannot be written.

Both are the core's `JournalError`s and ValueErrors. Decoding raises nothing but DecodeError
on bad input, so a consumer can catch one type around a poisoned record; encoding raises
EncodeError for values the wire format cannot carry (a NaN in a JSON payload, an unknown
duration text, a gap in the seqNrs...).
"""

from __future__ import annotations

from journal.errors import JournalError


class DecodeError(JournalError, ValueError):
    """Bytes that are not a valid encoding of what the caller asked for."""


class EncodeError(JournalError, ValueError):
    """A value that the kafka-journal wire format cannot represent."""
