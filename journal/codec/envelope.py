"""Per-journal encryption of event payloads (crypto-shredding, docs/erasure.md): AES-256-GCM
from `cryptography`, never hand-written crypto.

An encrypted Append is sealed once (version 2, `Sealer.events`): the first event with a payload
holds the Append's envelope as a binary payload, later ones the 4-byte reference `APPEND_REF`:

    b"KJE2" | key id (8) | first seqNr (i64) | last seqNr (i64) | nonce (12 bytes)
           | AES-GCM(per event of first..last: kind (1 byte) | length (u32) | payload bytes)

the associated data the journal id and the envelope's first 28 bytes (docs/erasure.md, "The
envelope"). Version 1, one envelope per event (still read, and a snapshot's form):

    MAGIC (b"KJE1") | nonce (12 bytes) | AES-GCM(kind (1 byte) | payload bytes) with its tag

`kind` is the original payload's (`j` JSON, `t` text, `b` binary; `n` none, version 2 only), so
a read gives back the very payload that was appended. Version 1's associated data is the
journal id and the event's seqNr: an envelope moved to another journal or seqNr fails to open
(`EnvelopeRefused`). A snapshot's payload is sealed in version 1, with `SNAPSHOT` in its
associated data too. An event without a payload stays without one. kafka-journal (Scala) reads
such events as opaque binary payloads.

The data keys are wrapped by a key-encryption key (`Kek`): AES-256-GCM again, with the journal
as associated data, so a wrapped key copied to another journal's row does not unwrap there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from msgspec.structs import replace

from journal.core.model import (
    BinaryPayload,
    Event,
    EventRecord,
    JsonPayload,
    Payload,
    TextPayload,
)
from journal.errors import JournalError

MAGIC = b"KJE1"
_NONCE = 12
_TAG = 16
KEY_BYTES = 32  # AES-256
_MIN_SEALED = len(MAGIC) + _NONCE + _TAG + 1  # an envelope's least length: a kind byte sealed


# version 2: an Append's one envelope (`Sealer.events`)
MAGIC_APPEND = b"KJE2"
# exactly these bytes, in an event after the one holding its Append's envelope: "that envelope"
APPEND_REF = MAGIC_APPEND
_APPEND_HEAD = struct.Struct(">4s8sqq")  # magic, the data key's id, first and last seqNr
_APPEND_NONCE_END = _APPEND_HEAD.size + _NONCE
_MIN_APPEND = _APPEND_NONCE_END + _TAG + 5  # one event's kind and length sealed
_PART = struct.Struct(">BI")  # an event's kind and payload length in the sealed plaintext
_NO_PART = _PART.pack(b"n"[0], 0)


def data_key_id(raw: bytes) -> bytes:
    """Which data key sealed an Append, in its envelope: 8 bytes of a labelled hash, not the key."""
    return hashlib.sha256(b"kafka-journal data key id\x00" + raw).digest()[:8]


def is_append_envelope(value: bytes) -> bool:
    """Whether a binary payload's bytes are an Append's envelope (version 2)."""
    return value[:4] == MAGIC_APPEND and len(value) >= _MIN_APPEND


def with_append_envelope(events: tuple[Event, ...]) -> tuple[Event, ...]:
    """A decoded record's events, each holding `APPEND_REF` given its Append's envelope payload
    (the same object: a read opens it once, whatever slice of the Append it keeps). Events are
    returned as they are when the record holds no envelope (a reference then stays the bytes it
    is: a plain journal's payload, or one the opening refuses)."""
    carrier: Payload | None = None
    for event in events:
        payload = event.payload
        if type(payload) is BinaryPayload and is_append_envelope(payload.value):
            carrier = payload
            break
    if carrier is None:
        return events
    return tuple(
        [
            replace(event, payload=carrier)
            if type(event.payload) is BinaryPayload and event.payload.value == APPEND_REF
            else event
            for event in events
        ]
    )


class EnvelopeRefused(JournalError, ValueError):
    """An envelope or a wrapped key that does not open with the key given: tampered with, moved
    to another journal or seqNr, or wrapped by another key-encryption key."""


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def is_sealed(payload: Payload | None) -> bool:
    """Whether a payload is an envelope (only ever asked of a journal that has a data key;
    `Opener.records` asks it inline)."""
    return (
        type(payload) is BinaryPayload
        and payload.value[:4] == MAGIC
        and len(payload.value) >= _MIN_SEALED
    )


# what an envelope is of, in its associated data besides the journal id and the seqNr: an event's
# (nothing, as since the first version) or a snapshot's, so neither opens as the other
SNAPSHOT = b"snapshot"


def _journal_part(journal_id: str, label: bytes) -> bytes:
    """The associated data but its last 8 bytes (the seqNr): the same for a journal's events."""
    raw = journal_id.encode("utf-8")
    return struct.pack(">I", len(raw)) + raw + label


_SEQ_NR = struct.Struct(">q").pack


def seal(
    cipher: AESGCM, journal_id: str, seq_nr: int, payload: Payload, label: bytes = b""
) -> BinaryPayload:
    return Sealer(cipher, journal_id, label).payload(seq_nr, payload)


class Sealer:
    """Seals one journal's payloads (of one `label`) with its data key; a cached data key holds
    its journal's (`DataKey.sealer`), so an Append builds no associated data but its seqNrs'.
    `key_id` (`data_key_id`) names the key in an Append's envelope."""

    __slots__ = ("_encrypt", "_key_id", "_prefix")

    def __init__(
        self, cipher: AESGCM, journal_id: str, label: bytes = b"", key_id: bytes = bytes(8)
    ) -> None:
        self._encrypt = cipher.encrypt
        self._key_id = key_id
        self._prefix = _journal_part(journal_id, label)

    def events(self, events: Sequence[Event]) -> tuple[Event, ...]:
        """An Append's numbered, consecutive events sealed in one envelope (version 2, module
        docstring): the first with a payload holds it, later ones `APPEND_REF`; events without
        a payload, and an Append without any, stay as they are."""
        if len(events) == 1:  # the common one-event Append: no loop, no join
            event = events[0]
            if event.payload is None:
                return (event,)
            seq_nr = event.seq_nr
            return (replace(event, payload=self._envelope(seq_nr, seq_nr, _part(event.payload))),)
        parts = [_NO_PART if event.payload is None else _part(event.payload) for event in events]
        holder = next((i for i, event in enumerate(events) if event.payload is not None), -1)
        if holder < 0:
            return tuple(events)
        envelope = self._envelope(events[0].seq_nr, events[-1].seq_nr, b"".join(parts))
        return tuple(
            [
                event
                if event.payload is None
                else replace(event, payload=envelope if i == holder else _REF_PAYLOAD)
                for i, event in enumerate(events)
            ]
        )

    def _envelope(self, first: int, last: int, plain: bytes) -> BinaryPayload:
        head = _APPEND_HEAD.pack(MAGIC_APPEND, self._key_id, first, last)
        nonce = os.urandom(_NONCE)  # 96 random bits: safe far beyond any journal's Append count
        return BinaryPayload(head + nonce + self._encrypt(nonce, plain, self._prefix + head))

    def payload(self, seq_nr: int, payload: Payload) -> BinaryPayload:
        """The payload sealed at `seq_nr`: what `Opener.payload` opens."""
        if isinstance(payload, JsonPayload):
            plain = b"j" + payload.raw
        elif isinstance(payload, TextPayload):
            plain = b"t" + payload.value.encode("utf-8")
        else:
            plain = b"b" + payload.value
        nonce = os.urandom(_NONCE)  # 96 random bits: safe far beyond any journal's event count
        return BinaryPayload(
            MAGIC + nonce + self._encrypt(nonce, plain, self._prefix + _SEQ_NR(seq_nr))
        )


def _part(payload: Payload) -> bytes:
    """A payload's entry in an Append's sealed plaintext: its kind, length and bytes."""
    if isinstance(payload, JsonPayload):
        raw, kind = payload.raw, _J
    elif isinstance(payload, TextPayload):
        raw, kind = payload.value.encode("utf-8"), _T
    else:
        raw, kind = payload.value, _B
    return _PART.pack(kind, len(raw)) + raw


def open_sealed(
    cipher: AESGCM, journal_id: str, seq_nr: int, payload: BinaryPayload, label: bytes = b""
) -> Payload:
    return Opener(cipher, journal_id, label).payload(seq_nr, payload.value)


_J, _T, _B, _N = b"j"[0], b"t"[0], b"b"[0], b"n"[0]
_REF_PAYLOAD = BinaryPayload(APPEND_REF)


class OpenedAppend:
    """The last Append envelope an `Opener` opened for a caller, its payloads decoded once: the
    events of one Append share their envelope's bytes (`with_append_envelope`), so a read opens
    each Append once whatever its events' pages or slices. It holds one Append's payloads."""

    __slots__ = ("first", "opener", "payloads", "value")

    def __init__(self) -> None:
        self.value: bytes | None = None
        self.opener: Opener | None = None
        self.first = 0
        self.payloads: list[Payload | None] = []


class Opener:
    """Opens one journal's envelopes (of one `label`) with its data key; a cached data key
    holds its journal's (`DataKey.opener`), the journal's part of the associated data built
    once. A read gives it to the decoder (`decode_events_binary`), which opens each Append's
    envelope as it meets it (`open_append`) and builds each event with its entry; `records`
    opens events decoded without a key (subscriptions, the pipeline), rebuilding each. Slices
    are bytes: at these sizes a memoryview's cost more than the copies they save, and
    `decrypt` takes them slower."""

    __slots__ = ("_decrypt", "_journal_id", "_key_id", "_label", "_prefix")

    def __init__(
        self, cipher: AESGCM, journal_id: str, label: bytes = b"", key_id: bytes = bytes(8)
    ) -> None:
        self._decrypt = cipher.decrypt
        self._journal_id = journal_id
        self._key_id = key_id
        self._label = label
        self._prefix = _journal_part(journal_id, label)

    def payload(self, seq_nr: int, value: bytes) -> Payload:
        """A sealed payload's `value` (`is_sealed`), opened; EnvelopeRefused if it does not
        open with this key at this journal and seqNr."""
        try:
            plain = self._decrypt(
                value[4 : 4 + _NONCE], value[4 + _NONCE :], self._prefix + _SEQ_NR(seq_nr)
            )
        except InvalidTag:
            raise self.refused(seq_nr) from None
        return _payload_of(plain)

    def records(
        self, records: list[EventRecord], last: OpenedAppend | None = None
    ) -> list[EventRecord]:
        """`records` decoded without the key, each sealed payload opened: one pass, each record
        rebuilt once with its opened payload (a payload that is not an envelope, appended
        before the deployment encrypted, stays as it is); EnvelopeRefused at the first that
        does not open. An Append's envelope (version 2) is opened once, and kept in `last` for
        the next call."""
        decrypt, prefix = self._decrypt, self._prefix
        # the module's names as locals: a global's look-up per use costs as much as a slice
        binary, magic, least, seq_nr_bytes = BinaryPayload, MAGIC, _MIN_SEALED, _SEQ_NR
        json, j, rebuilt = JsonPayload, _J, replace
        magic_end = len(MAGIC)
        nonce_end = magic_end + _NONCE
        if last is None:
            last = OpenedAppend()
        # the Append opened last, as locals: its events come one after another
        current = last.value if last.opener is self else None
        first, payloads = last.first, last.payloads
        opened: list[EventRecord] = []
        append = opened.append
        for record in records:
            event = record.event
            payload = event.payload
            if type(payload) is not binary:
                append(record)
                continue
            value = payload.value
            if value is not current:
                if value[:magic_end] != MAGIC_APPEND or len(value) < _MIN_APPEND:
                    current = None  # not version 2: version 1 below, or plain
                else:
                    self._open_append(value, last)
                    current, first, payloads = value, last.first, last.payloads
            if current is not None:
                at = event.seq_nr - first
                # an envelope given to an event outside its range (or with no payload there):
                # tampered with, so refused, never an entry of another event
                if not 0 <= at < len(payloads) or (opened_payload := payloads[at]) is None:
                    raise self.refused(event.seq_nr, "the event is not in its Append's envelope")
                append(rebuilt(record, event=rebuilt(event, payload=opened_payload)))
                continue
            # `is_sealed`, inline: once per event read
            if value[:magic_end] != magic or len(value) < least:
                append(record)
                continue
            seq_nr = event.seq_nr
            try:
                plain = decrypt(
                    value[magic_end:nonce_end], value[nonce_end:], prefix + seq_nr_bytes(seq_nr)
                )
            except InvalidTag:
                raise self.refused(seq_nr) from None
            # a JSON payload's case inline, the rest by `_payload_of`: a call costs what a case does
            opened_payload = json(plain[1:]) if plain[0] == j else _payload_of(plain)
            append(rebuilt(record, event=rebuilt(event, payload=opened_payload)))
        return opened

    def _open_append(self, value: bytes, last: OpenedAppend) -> None:
        """An Append's envelope opened into `last`: its payloads, decoded once each."""
        first, payloads = self.append_payloads(value)
        last.value, last.opener, last.first, last.payloads = value, self, first, payloads

    def open_append(self, value: bytes) -> tuple[int, int, bytes]:
        """An Append's envelope (`is_append_envelope`) decrypted: its first and last seqNr and
        its plaintext (an entry an event: `kind | length | payload`); EnvelopeRefused if it does
        not open with this key at this journal."""
        _magic, key_id, first, last = _APPEND_HEAD.unpack_from(value)
        if key_id != self._key_id:
            raise self.refused(first, "the Append was sealed by another data key")
        try:
            plain = self._decrypt(
                value[_APPEND_HEAD.size : _APPEND_NONCE_END],
                value[_APPEND_NONCE_END:],
                self._prefix + value[: _APPEND_HEAD.size],
            )
        except InvalidTag:
            raise self.refused(first) from None
        return first, last, plain

    def append_payloads(self, value: bytes) -> tuple[int, list[Payload | None]]:
        """An Append's envelope opened: its first seqNr and the payload of each of its events
        in seqNr order (None: that event has none), each decoded once; EnvelopeRefused if it
        does not open, or does not hold its range."""
        first, last_seq_nr, plain = self.open_append(value)
        payloads: list[Payload | None] = []
        add = payloads.append
        unpack, size, end, at = _PART.unpack_from, _PART.size, len(plain), 0
        while at < end:
            kind, length = unpack(plain, at)
            at += size
            raw = plain[at : at + length]
            at += length
            if kind == _J:
                add(JsonPayload(raw))
            elif kind == _N:
                add(None)
            elif kind == _T:
                add(TextPayload(raw.decode("utf-8")))
            else:
                add(BinaryPayload(raw))
        # the range is sealed in, and the record's seqNrs are consecutive: an event is its entry
        if len(payloads) != last_seq_nr - first + 1:
            raise self.refused(first, "the Append's envelope does not hold its range")
        return first, payloads

    def events(self, events: Sequence[Event]) -> tuple[Event, ...]:
        """A decoded record's events (its references given their envelope:
        `with_append_envelope`), each sealed payload opened: what the decoder does in its
        loop (`decode_events_binary` with an opener), for the values it does not take there."""
        last = OpenedAppend()
        return tuple([self._event(event, last) for event in events])

    def _event(self, event: Event, last: OpenedAppend) -> Event:
        payload = event.payload
        if type(payload) is not BinaryPayload:
            return event
        value = payload.value
        if is_append_envelope(value):
            if last.value is not value:
                self._open_append(value, last)
            return replace(event, payload=self.entry(last.first, last.payloads, event.seq_nr))
        if is_sealed(payload):
            return replace(event, payload=self.payload(event.seq_nr, value))
        return event

    def entry(self, first: int, payloads: list[Payload | None], seq_nr: int) -> Payload:
        """The event at `seq_nr`'s payload in its Append's opened envelope (`append_payloads`):
        an envelope given to an event outside its range (or with no payload there) was
        tampered with, so refused, never an entry of another event."""
        at = seq_nr - first
        if not 0 <= at < len(payloads) or (payload := payloads[at]) is None:
            raise self.refused(seq_nr, "the event is not in its Append's envelope")
        return payload

    def refused(self, seq_nr: int, why: str = "") -> EnvelopeRefused:
        label = self._label
        return EnvelopeRefused(
            f"journal {self._journal_id!r} seqNr {seq_nr}{' ' + label.decode() if label else ''}: "
            + (why or "the envelope does not open with the journal's data key")
        )


def _payload_of(plain: bytes) -> Payload:
    """An opened envelope's payload, of the kind its first byte says (`seal`)."""
    kind = plain[0]  # GCM opened it: at least the kind byte `seal` wrote
    if kind == _J:
        return JsonPayload(plain[1:])
    if kind == _T:
        return TextPayload(plain[1:].decode("utf-8"))
    return BinaryPayload(plain[1:])


def request_digest_key(cipher_key: bytes, value: bytes) -> bytes:
    """What an idempotency digest covers for an encrypted journal: an HMAC of the plain value
    under the data key, so the digest in Kafka's headers tells nothing of the payloads once the
    key is gone (a plain SHA-256 of a short payload can be guessed)."""
    return hmac.digest(cipher_key, value, "sha256")


class Kek(Protocol):
    """A key-encryption key: wraps and unwraps data keys. A KMS can implement it (wrap and
    unwrap as its Encrypt and Decrypt calls); `FileKek` is the key an operator supplies."""

    @property
    def id(self) -> str:
        """Names this key in each wrapped key's row, so a rotation knows what to rewrap."""
        ...

    def wrap(self, data_key: bytes, context: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The data key; EnvelopeRefused if `wrapped` was not wrapped by this key for
        `context`."""
        ...


class FileKek:
    """A 32-byte key, given base64-encoded in a file or a variable (`KJ_KEK_FILE`, `KJ_KEK`)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a key-encryption key is {KEY_BYTES} bytes, not {len(key)}")
        self._cipher = AESGCM(key)
        # a fingerprint, not the key: 8 bytes of a hash under a fixed label
        self._id = hashlib.sha256(b"kafka-journal kek id\x00" + key).hexdigest()[:16]

    @classmethod
    def of_text(cls, text: str) -> FileKek:
        try:
            key = base64.b64decode(text.strip(), validate=True)
        except ValueError:
            raise ValueError("a key-encryption key is 32 bytes in base64") from None
        return cls(key)

    @classmethod
    def of_file(cls, path: Path) -> FileKek:
        return cls.of_text(path.read_text())

    @property
    def id(self) -> str:
        return self._id

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._cipher.encrypt(nonce, data_key, context)

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        try:
            return self._cipher.decrypt(wrapped[:_NONCE], wrapped[_NONCE:], context)
        except InvalidTag:
            raise EnvelopeRefused(f"a data key does not unwrap with the KEK {self._id}") from None


def new_kek_text() -> str:
    """A fresh key-encryption key in base64, for `kafka-journal keys new-kek`."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()
