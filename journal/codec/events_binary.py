"""The record value of an Append whose payloadType is binary (kafka-journal's scodec `Events`).

All integers are big-endian and signed; every length counts bytes.

    version  u8      1 (written), or 0: the v0 form, which ends after the events
    count    i32     number of events, at least 1
    count x  i32 length, then the event in exactly that many bytes:
        seqNr    i64
        tags     i32 length of the tag list, then per tag: i32 length + UTF-8 bytes
        kind     u8      0 none, 1 binary, 2 json, 3 text
        payload  i32 length + bytes: nothing, raw bytes, JSON text, UTF-8 text
    metadata the rest of the value: PayloadMetadata as JSON, `{}` when empty (version 1 only)

An encrypted Append (journal/codec/envelope.py, version 2) holds its envelope in its first
event with a payload and 4 reference bytes in the later ones: decoding gives those events the
envelope's payload (one shared object), so a slice of the Append still opens.

Tags are written in kafka-journal's order (see `journal.codec.tag_order`) and read as a set.
Decoding is stricter than scodec's: a length-prefixed region must be consumed exactly, other
version bytes are rejected and a v0 value must end after its events. These functions check the
layout only; seqNr order is checked by `journal.codec.events`.
"""

from __future__ import annotations

import struct
from typing import Final

from journal.codec.envelope import (
    _J,
    _N,
    _PART,
    _T,
    APPEND_REF,
    MAGIC,
    EnvelopeRefused,
    Opener,
    is_append_envelope,
    is_sealed,
    with_append_envelope,
)
from journal.codec.errors import DecodeError, EncodeError
from journal.codec.json_value import dumps, loads
from journal.codec.payload_metadata import payload_metadata_from_json, payload_metadata_to_json
from journal.codec.tag_order import scala_set_order
from journal.core.model import (
    BinaryPayload,
    Event,
    Events,
    InvalidValue,
    JsonPayload,
    Payload,
    PayloadMetadata,
    TextPayload,
    check_consecutive,
    checked_json_payload,
)

VERSION_0: Final = 0
VERSION_1: Final = 1

_NONE, _BINARY, _JSON, _TEXT = 0, 1, 2, 3

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">Bi")  # version, event count
_EVENT_HEAD = struct.Struct(">iqi")  # the event's length, seqNr, the tags' length
_PAYLOAD_HEAD = struct.Struct(">Bi")  # payload kind, payload length
_EVENT_FIXED = 8 + 4 + 1 + 4  # an event's bytes besides its tags and payload
_MAX_SIZE = 2**31 - 1
_NO_METADATA = b"{}"  # PayloadMetadata() as JSON: most Appends carry none
_NO_PAYLOAD_METADATA = PayloadMetadata()
_NO_TAGS: frozenset[str] = frozenset()
# a reference as written (no tags): its event's length, and its bytes from the tags' length on
_REF_SIZE = _EVENT_FIXED + len(APPEND_REF)
_REF_REST = _I32.pack(0) + _PAYLOAD_HEAD.pack(_BINARY, len(APPEND_REF)) + APPEND_REF


def encode_events_binary(events: Events) -> bytes:
    # one pack per event and one join: a sealed journal encodes every Append in this form, and
    # a bytearray grown a field at a time cost ~2.8 us a one-event Append (BENCHMARKS.md)
    parts = [_HEAD.pack(VERSION_1, len(events.events))]
    parts += [_encode_event(event) for event in events.events]
    metadata = events.metadata
    if metadata.expire_after is None and metadata.data is None:
        parts.append(_NO_METADATA)
    else:
        parts.append(dumps(payload_metadata_to_json(metadata), "events metadata"))
    return b"".join(parts)


def decode_events_binary(value: bytes, opener: Opener | None = None) -> Events:
    """The value's events; with the `opener` of their journal's data key, each sealed payload
    opened as its event is built (an Append's envelope opened once, each event built once, with
    its clear payload). A value that is malformed, or whose seqNrs are not consecutive, raises
    its fault (DecodeError, InvalidValue) before any opening; a sound one that does not open,
    EnvelopeRefused."""
    decoded = _decode_fast(value, opener)
    if decoded is not None:
        return decoded
    decoded = _decode_careful(value)  # not a well-formed value: it says what is wrong
    events = decoded.events
    if len(events) > 1:  # an encrypted Append's later events name its one envelope
        events = with_append_envelope(events)
    if opener is not None:
        check_consecutive(events)  # an entry is the event at seqNr - first: only once sound
        events = opener.events(events)
    return decoded if events is decoded.events else Events(events, decoded.metadata)


def _decode_fast(value: bytes, opener: Opener | None = None) -> Events | None:
    """A well-formed value decoded in one loop of `unpack_from`s and slices, or None for
    anything else (`_decode_careful` then names the fault). An encrypted Append's references
    are given its envelope's payload as they are met (`with_append_envelope` otherwise), or
    with an `opener` their entries of the envelope opened where it is met: a rebuild of each
    event with its opened payload after the decode was most of what an encrypted read added
    (BENCHMARKS.md, "Opened inside the decode"). A sealed journal's every record is binary: a
    `_Reader` an event and a region cost ~2 us an event (BENCHMARKS.md, "An encrypted Append
    sealed once")."""
    end = len(value)
    try:
        version, count = _HEAD.unpack_from(value, 0)
        if version not in (VERSION_0, VERSION_1) or count < 0:
            return None
        unpack_event, unpack_payload, unpack_i32 = (
            _EVENT_HEAD.unpack_from,
            _PAYLOAD_HEAD.unpack_from,
            _I32.unpack_from,
        )
        event, binary, no_tags, ref = Event, BinaryPayload, _NO_TAGS, APPEND_REF
        carrier: BinaryPayload | None = None  # an encrypted Append's envelope, once met
        unresolved = False  # a reference met before the envelope (not as written, but valid)
        # with an opener, once the Append's envelope is met: its plaintext, where the next
        # event's entry starts in it, that event's seqNr, and the envelope's last seqNr
        plain: bytes | None = None
        cursor = expect = last = 0
        unpack_part, part_size = _PART.unpack_from, _PART.size
        ref_size, ref_event_size, ref_rest = _REF_SIZE, _REF_SIZE + 4, _REF_REST
        json_payload, text_payload, json_kind, text_kind = JsonPayload, TextPayload, _J, _T
        events: list[Event] = []
        append = events.append
        at = _HEAD.size
        for _ in range(count):
            size, seq_nr, tags_size = unpack_event(value, at)
            if size == ref_size and plain is not None and value.startswith(ref_rest, at + 12):
                at += ref_event_size  # a reference without tags, as written: its entry below
                tags = no_tags
            else:
                stop = at + 4 + size
                at += _EVENT_HEAD.size
                tags_end = at + tags_size
                if size < _EVENT_FIXED or stop > end or tags_size < 0 or tags_end > stop:
                    return None
                if tags_size == 0:
                    tags = no_tags
                else:
                    found = set()
                    while at < tags_end:
                        (length,) = unpack_i32(value, at)
                        at += 4
                        if length < 0 or at + length > tags_end:
                            return None
                        found.add(value[at : at + length].decode("utf-8"))
                        at += length
                    tags = frozenset(found)
                kind, length = unpack_payload(value, at)
                at += _PAYLOAD_HEAD.size
                if at + length != stop or length < 0:
                    return None
                if kind == _BINARY:
                    is_ref = length == 4 and value.startswith(ref, at)
                    if plain is None:
                        if is_ref:
                            if carrier is not None:
                                append(event(seq_nr, tags, carrier))
                            elif opener is not None:
                                return None  # not as written: the careful path opens it
                            else:
                                unresolved = True
                                append(event(seq_nr, tags, binary(ref)))
                            at = stop
                            continue
                        payload = binary(value[at:stop])
                        if (
                            carrier is None
                            and value.startswith(ref, at)
                            and is_append_envelope(payload.value)
                        ):
                            carrier = payload
                            if opener is None:
                                append(event(seq_nr, tags, payload))
                                at = stop
                                continue
                            first, last, plain = opener.open_append(payload.value)
                            if seq_nr < first:
                                return None
                            for _ in range(seq_nr - first):  # the entries of events before it
                                cursor += part_size + unpack_part(plain, cursor)[1]
                            expect = seq_nr  # its entry below, as a reference's
                        else:
                            if (
                                opener is not None
                                and value.startswith(MAGIC, at)
                                and is_sealed(payload)
                            ):
                                # version 1: an envelope of its own
                                append(event(seq_nr, tags, opener.payload(seq_nr, payload.value)))
                            else:
                                append(event(seq_nr, tags, payload))
                            at = stop
                            continue
                    elif not is_ref:
                        return None  # a payload of its own in a sealed Append: the careful path's
                    at = stop  # its entry below
                elif kind == _JSON:
                    if plain is not None:
                        return None  # a payload in clear in a sealed Append: the careful path's
                    append(event(seq_nr, tags, checked_json_payload(value[at:stop])))
                    at = stop
                    continue
                elif kind == _TEXT:
                    if plain is not None:
                        return None
                    append(event(seq_nr, tags, TextPayload(value[at:stop].decode("utf-8"))))
                    at = stop
                    continue
                elif kind == _NONE and length == 0:
                    if plain is not None:  # its entry (none sealed) passed over
                        if seq_nr != expect:
                            return None
                        cursor += part_size + unpack_part(plain, cursor)[1]
                        expect += 1
                    append(event(seq_nr, tags, None))
                    at = stop
                    continue
                else:
                    return None
            # the event's entry in its Append's opened envelope, at seqNr - first: the seqNrs
            # from the envelope's holder on are consecutive, or the careful path names the
            # fault (or refuses an event outside its envelope)
            if seq_nr != expect:
                return None
            part_kind, part_length = unpack_part(plain, cursor)
            cursor += part_size
            raw = plain[cursor : cursor + part_length]
            cursor += part_length
            expect += 1
            if part_kind == json_kind:
                append(event(seq_nr, tags, json_payload(raw)))
            elif part_kind == text_kind:
                append(event(seq_nr, tags, text_payload(raw.decode("utf-8"))))
            elif part_kind != _N:
                append(event(seq_nr, tags, binary(raw)))
            else:
                return None  # no payload sealed for it: the careful path refuses
        # every entry of the envelope, and nothing more, taken (else the careful path refuses)
        if plain is not None and (expect != last + 1 or cursor != len(plain)):
            return None
        decoded = tuple(events)
        if unresolved:
            decoded = with_append_envelope(decoded)
        if version == VERSION_0:
            return Events(decoded, _NO_PAYLOAD_METADATA) if at == end else None
        rest = value[at:]
        if rest == _NO_METADATA:
            return Events(decoded, _NO_PAYLOAD_METADATA)
        metadata = payload_metadata_from_json(
            loads(rest, "binary record value metadata"), "binary record value metadata"
        )
        return Events(decoded, metadata)
    except (struct.error, UnicodeDecodeError, InvalidValue, DecodeError, EnvelopeRefused):
        return None  # a refusal too: the careful path names a fault of the value first


def _decode_careful(value: bytes) -> Events:
    reader = _Reader(value, "binary record value")
    version = reader.u8("version")
    if version not in (VERSION_0, VERSION_1):
        raise DecodeError(f"binary record value: unknown version {version}")
    count = reader.i32("event count")
    if count < 0:
        raise DecodeError(f"binary record value: negative event count {count}")
    events = tuple(_decode_event(reader.sized(f"event {i}")) for i in range(count))
    if version == VERSION_0:
        reader.expect_end()
        metadata = PayloadMetadata()
    else:
        metadata = payload_metadata_from_json(
            loads(reader.rest(), "binary record value metadata"), "binary record value metadata"
        )
    return Events(events, metadata)


def _encode_event(event: Event) -> bytes:
    """The event with its i32 length prefix."""
    seq_nr = event.seq_nr
    kind, payload = _encode_payload(event.payload, seq_nr)
    tags = (
        b"".join([_sized(_utf8(tag, f"event {seq_nr} tag")) for tag in scala_set_order(event.tags)])
        if event.tags
        else b""
    )
    size = _EVENT_FIXED + len(tags) + len(payload)  # bounds every length inside it
    if size > _MAX_SIZE:
        raise EncodeError(f"{size} bytes do not fit an int32 length prefix")
    return (
        _EVENT_HEAD.pack(size, seq_nr, len(tags))
        + tags
        + _PAYLOAD_HEAD.pack(kind, len(payload))
        + payload
    )


def _encode_payload(payload: Payload | None, seq_nr: int) -> tuple[int, bytes]:
    # isinstance, not `match`: class patterns cost ~0.3 us a payload on this per-event path
    if payload is None:
        return _NONE, b""
    if isinstance(payload, BinaryPayload):
        return _BINARY, bytes(payload.value)
    if isinstance(payload, JsonPayload):
        return _JSON, payload.raw
    if isinstance(payload, TextPayload):
        return _TEXT, _utf8(payload.value, f"event {seq_nr} payload")
    raise EncodeError(f"event {seq_nr} payload is not a Payload: {payload!r}")


def _decode_event(reader: _Reader) -> Event:
    seq_nr = reader.i64("seqNr")
    tags_reader = reader.sized("tags")
    tags: set[str] = set()
    while not tags_reader.at_end():
        tags.add(tags_reader.sized("tag").text())
    kind = reader.u8("payload kind")
    payload_reader = reader.sized("payload")
    payload: Payload | None
    if kind == _NONE:
        payload_reader.expect_end()
        payload = None
    elif kind == _BINARY:
        payload = BinaryPayload(payload_reader.rest())
    elif kind == _JSON:
        try:
            payload = checked_json_payload(payload_reader.rest())
        except InvalidValue as e:
            raise DecodeError(f"{payload_reader.where} (json): {e}") from e
    elif kind == _TEXT:
        payload = TextPayload(payload_reader.text())
    else:
        raise DecodeError(f"{reader.where}: unknown payload kind {kind}")
    reader.expect_end()
    return Event(seq_nr, frozenset(tags), payload)


def _sized(data: bytes) -> bytes:
    if len(data) > _MAX_SIZE:
        raise EncodeError(f"{len(data)} bytes do not fit an int32 length prefix")
    return _I32.pack(len(data)) + data


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise EncodeError(f"{what} is not valid Unicode text: {e}") from e


class _Reader:
    """A cursor over `data[start:end]` that raises DecodeError instead of running short."""

    __slots__ = ("_data", "_end", "_pos", "where")

    def __init__(self, data: bytes, where: str, start: int = 0, end: int | None = None) -> None:
        self._data = data
        self._pos = start
        self._end = len(data) if end is None else end
        self.where = where

    def at_end(self) -> bool:
        return self._pos == self._end

    def expect_end(self) -> None:
        if not self.at_end():
            raise DecodeError(f"{self.where}: {self._end - self._pos} unexpected trailing bytes")

    def _take(self, size: int, what: str) -> int:
        start = self._pos
        if self._end - start < size:
            raise DecodeError(
                f"{self.where}: truncated {what}, needs {size} bytes, has {self._end - start}"
            )
        self._pos = start + size
        return start

    def u8(self, what: str) -> int:
        return self._data[self._take(1, what)]

    def i32(self, what: str) -> int:
        value: int = _I32.unpack_from(self._data, self._take(4, what))[0]
        return value

    def i64(self, what: str) -> int:
        value: int = _I64.unpack_from(self._data, self._take(8, what))[0]
        return value

    def sized(self, what: str) -> _Reader:
        """The region announced by an i32 length prefix."""
        size = self.i32(f"{what} length")
        if size < 0:
            raise DecodeError(f"{self.where}: negative {what} length {size}")
        start = self._take(size, what)
        return _Reader(self._data, f"{self.where}, {what}", start, start + size)

    def rest(self) -> bytes:
        start = self._take(self._end - self._pos, "rest")
        return self._data[start : self._end]

    def text(self) -> str:
        try:
            return self.rest().decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"{self.where}: invalid UTF-8: {e}") from e
