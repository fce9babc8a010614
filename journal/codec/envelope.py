"""Per-journal encryption of event payloads (crypto-shredding, docs/erasure.md): AES-256-GCM
from `cryptography`, never hand-written crypto.

An encrypted event's payload is a binary payload holding the envelope

    MAGIC (b"KJE1") | nonce (12 bytes) | AES-GCM(kind (1 byte) | payload bytes) with its tag

`kind` is the original payload's (`j` JSON, `t` text, `b` binary), so a read gives back the very
payload that was appended. The associated data is the journal id and the event's seqNr: an
envelope moved to another journal or seqNr fails to open (`EnvelopeRefused`). A snapshot's
payload is sealed the same way, with `SNAPSHOT` in its associated data too. An event without
a payload stays without one. kafka-journal (Scala) reads such events as opaque binary payloads.

The data keys are wrapped by a key-encryption key (`Kek`): AES-256-GCM again, with the journal
as associated data, so a wrapped key copied to another journal's row does not unwrap there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from msgspec.structs import replace

from journal.core.model import BinaryPayload, EventRecord, JsonPayload, Payload, TextPayload
from journal.errors import JournalError

MAGIC = b"KJE1"
_NONCE = 12
_TAG = 16
KEY_BYTES = 32  # AES-256
_MIN_SEALED = len(MAGIC) + _NONCE + _TAG + 1  # an envelope's least length: a kind byte sealed


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
    its journal's (`DataKey.sealer`), so an Append builds no associated data but its seqNr's."""

    __slots__ = ("_encrypt", "_prefix")

    def __init__(self, cipher: AESGCM, journal_id: str, label: bytes = b"") -> None:
        self._encrypt = cipher.encrypt
        self._prefix = _journal_part(journal_id, label)

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


def open_sealed(
    cipher: AESGCM, journal_id: str, seq_nr: int, payload: BinaryPayload, label: bytes = b""
) -> Payload:
    return Opener(cipher, journal_id, label).payload(seq_nr, payload.value)


_J, _T = b"j"[0], b"t"[0]


class Opener:
    """Opens one journal's envelopes (of one `label`) with its data key; a cached data key
    holds its journal's (`DataKey.opener`). A read opens a whole page in `records`' one loop,
    the journal's part of the associated data built once: the cipher's fixed ~0.45 us a call
    (its context set up anew each time) is then about half of the opening's cost an event
    (BENCHMARKS.md). Slices are bytes: at these sizes a memoryview's cost more than the copies
    they save, and `decrypt` takes them slower."""

    __slots__ = ("_decrypt", "_journal_id", "_label", "_prefix")

    def __init__(self, cipher: AESGCM, journal_id: str, label: bytes = b"") -> None:
        self._decrypt = cipher.decrypt
        self._journal_id = journal_id
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
            raise self._refused(seq_nr) from None
        return _payload_of(plain)

    def records(self, records: list[EventRecord]) -> list[EventRecord]:
        """`records`, each sealed payload opened: one pass, each record rebuilt once with its
        opened payload (a payload that is not an envelope, appended before the deployment
        encrypted, stays as it is); EnvelopeRefused at the first that does not open."""
        decrypt, prefix = self._decrypt, self._prefix
        # the module's names as locals: a global's look-up per use costs as much as a slice
        binary, magic, least, seq_nr_bytes = BinaryPayload, MAGIC, _MIN_SEALED, _SEQ_NR
        json, j, rebuilt = JsonPayload, _J, replace
        magic_end = len(MAGIC)
        nonce_end = magic_end + _NONCE
        opened: list[EventRecord] = []
        append = opened.append
        for record in records:
            event = record.event
            payload = event.payload
            # `is_sealed`, inline: once per event read
            if (
                type(payload) is not binary
                or (value := payload.value)[:magic_end] != magic
                or len(value) < least
            ):
                append(record)
                continue
            seq_nr = event.seq_nr
            try:
                plain = decrypt(
                    value[magic_end:nonce_end], value[nonce_end:], prefix + seq_nr_bytes(seq_nr)
                )
            except InvalidTag:
                raise self._refused(seq_nr) from None
            # a JSON payload's case inline, the rest by `_payload_of`: a call costs what a case does
            opened_payload = json(plain[1:]) if plain[0] == j else _payload_of(plain)
            append(rebuilt(record, event=rebuilt(event, payload=opened_payload)))
        return opened

    def _refused(self, seq_nr: int) -> EnvelopeRefused:
        label = self._label
        return EnvelopeRefused(
            f"journal {self._journal_id!r} seqNr {seq_nr}{' ' + label.decode() if label else ''}: "
            "the envelope does not open with the journal's data key"
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
