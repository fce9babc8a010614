"""The envelope of an encrypted payload and the wrapping of data keys (journal/codec/envelope.py,
journal/store/keys.py): what opens, what refuses, rotation, and the cache's bound."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from msgspec.structs import replace

from journal.client.erasure import seal_events
from journal.codec.envelope import (
    APPEND_REF,
    EnvelopeRefused,
    FileKek,
    OpenedAppend,
    Opener,
    Sealer,
    data_key_id,
    is_append_envelope,
    is_sealed,
    new_data_key,
    new_kek_text,
    open_sealed,
    seal,
)
from journal.codec.errors import DecodeError
from journal.codec.events_binary import decode_events_binary, encode_events_binary
from journal.core.model import (
    BinaryPayload,
    Event,
    EventRecord,
    Events,
    InvalidValue,
    JournalKey,
    JsonPayload,
    Payload,
    TextPayload,
)
from journal.errors import JournalErased
from journal.settings import Settings
from journal.store.keys import DataKeys, KeyState, MemoryKeyStore, context


@pytest.mark.parametrize(
    "payload",
    [JsonPayload(b'{"n":1e400}'), TextPayload("é"), BinaryPayload(b"\x00KJE1"), BinaryPayload(b"")],
)
def test_a_sealed_payload_opens_to_the_very_payload(payload: Payload) -> None:
    cipher = AESGCM(new_data_key())
    sealed = seal(cipher, "j", 7, payload)
    assert is_sealed(sealed) and not is_sealed(payload)
    assert open_sealed(cipher, "j", 7, sealed) == payload


def test_an_envelope_moved_to_another_journal_or_seq_nr_or_key_does_not_open() -> None:
    cipher = AESGCM(new_data_key())
    sealed = seal(cipher, "j", 7, TextPayload("x"))
    for journal_id, seq_nr, other in (("k", 7, cipher), ("j", 8, cipher)):
        with pytest.raises(EnvelopeRefused):
            open_sealed(other, journal_id, seq_nr, sealed)
    with pytest.raises(EnvelopeRefused):
        open_sealed(AESGCM(new_data_key()), "j", 7, sealed)


def _record(seq_nr: int, payload: Payload | None) -> EventRecord:
    return EventRecord(
        Event(seq_nr, frozenset({"tag"}), payload),
        datetime(2026, 11, 27, tzinfo=UTC),
        2,
        100 + seq_nr,
        headers={"h": "v"},
    )


def test_a_page_opens_in_one_pass_as_each_record_would() -> None:
    """`Opener.records`, a read's loop: every kind opens, a plain payload (appended before
    the deployment encrypted) and a missing one stay as they are, the rest of each record too."""
    cipher = AESGCM(new_data_key())
    payloads: list[Payload | None] = [
        JsonPayload(b'{"n":1}'),
        TextPayload("é"),
        BinaryPayload(b"\x00KJE1"),
        BinaryPayload(b""),
        None,
    ]
    page = [
        _record(seq_nr, None if payload is None else seal(cipher, "j", seq_nr, payload))
        for seq_nr, payload in enumerate(payloads, 1)
    ]
    plain = [_record(6, JsonPayload(b"[]")), _record(7, BinaryPayload(b"KJE1 too short"))]
    expected = [_record(seq_nr, payload) for seq_nr, payload in enumerate(payloads, 1)] + plain
    assert Opener(cipher, "j").records(page + plain) == expected


def test_a_page_refuses_at_an_envelope_that_does_not_open() -> None:
    cipher = AESGCM(new_data_key())
    sealed = seal(cipher, "j", 1, TextPayload("x"))
    tampered = BinaryPayload(sealed.value[:-1] + bytes([sealed.value[-1] ^ 1]))
    for opener, page in (
        (Opener(cipher, "j"), [_record(1, tampered)]),
        (Opener(cipher, "k"), [_record(1, sealed)]),  # moved to another journal
        (Opener(cipher, "j"), [_record(2, sealed)]),  # to another seqNr
        (Opener(AESGCM(new_data_key()), "j"), [_record(1, sealed)]),  # another key
    ):
        with pytest.raises(EnvelopeRefused, match="seqNr"):
            opener.records(page)


def test_a_wrapped_key_unwraps_only_with_its_kek_for_its_journal() -> None:
    kek, other = FileKek.of_text(new_kek_text()), FileKek.of_text(new_kek_text())
    data_key = new_data_key()
    wrapped = kek.wrap(data_key, b"t\x00a")
    assert kek.unwrap(wrapped, b"t\x00a") == data_key
    with pytest.raises(EnvelopeRefused):
        kek.unwrap(wrapped, b"t\x00b")
    with pytest.raises(EnvelopeRefused):
        other.unwrap(wrapped, b"t\x00a")
    assert kek.id != other.id


async def test_rotation_rewraps_the_data_keys_and_the_events_still_open() -> None:
    store = MemoryKeyStore()
    old, new = FileKek.of_text(new_kek_text()), FileKek.of_text(new_kek_text())
    before = DataKeys(store, old)
    key = JournalKey("t", "a")
    data_key = await before.for_append(key)
    sealed = seal(data_key.cipher, "a", 1, TextPayload("x"))

    rotating = DataKeys(store, new, old_keks=[old])
    assert await rotating.rotate("t") == (1, 0)
    assert await rotating.rotate("t") == (0, 1)
    row = store.keys[key]
    assert row.kek_id == new.id and row.wrapped is not None
    assert new.unwrap(row.wrapped, context(key)) == data_key.raw

    after = DataKeys(store, new)  # the old KEK retired
    opened = await after.for_read(key)
    assert opened is not None
    assert open_sealed(opened.cipher, "a", 1, sealed) == TextPayload("x")


async def test_the_cache_is_bounded_and_trusts_an_entry_for_its_ttl() -> None:
    store = MemoryKeyStore()
    now = [0.0]
    keys = DataKeys(
        store, FileKek.of_text(new_kek_text()), cache_size=2, ttl_s=10, clock=lambda: now[0]
    )
    a, b, c = (JournalKey("t", i) for i in "abc")
    for key in (a, b, c):
        await keys.for_append(key)
    assert len(keys) == 2

    await store.mark_erasing(b)  # another process's erasure
    await store.mark_erasing(c)
    assert await keys.for_read(b) is not None  # cached: trusted for its ttl
    assert await keys.for_append(c) is not None  # an append's quick look, alike
    now[0] = 11
    with pytest.raises(JournalErased, match="erasing"):
        await keys.for_read(b)
    with pytest.raises(JournalErased, match="erasing"):
        await keys.for_append(c)  # and no longer
    await store.destroy(b)
    assert store.keys[b].state is KeyState.ERASED
    with pytest.raises(JournalErased):
        await keys.for_append(b)  # an erased id never gets a key again


async def test_a_journal_has_one_key_across_a_chain_of_grows() -> None:
    """`key_identity`: t -> t.2 -> t.2.4, a key made by a first append in the last topic is the
    first topic's row, which every topic of the chain then finds; other topics keep theirs."""
    store = MemoryKeyStore()
    keys = DataKeys(store, FileKek.of_text(new_kek_text()))
    keys.follow("t", "t.2")
    keys.follow("t.2", "t.2.4")
    made = await keys.for_append(JournalKey("t.2.4", "j"))
    assert list(store.keys) == [JournalKey("t", "j")]
    fresh = DataKeys(store, keys.kek)  # another process, told the chain by the registry
    fresh.follow("t", "t.2")
    fresh.follow("t.2", "t.2.4")
    for topic in ("t", "t.2", "t.2.4"):
        found = await fresh.for_read(JournalKey(topic, "j"))
        assert found is not None and found.raw == made.raw, topic
    assert await keys.for_read(JournalKey("u", "j")) is None  # another chain: no key
    await store.mark_erasing(keys.identity(JournalKey("t.2", "j")))
    keys.forget(JournalKey("t.2.4", "j"))  # the same cached entry
    with pytest.raises(JournalErased):
        await keys.for_read(JournalKey("t.2", "j"))


# version 2: an Append sealed once (docs/erasure.md, "The envelope")


class CountingCipher:
    """AESGCM, its calls counted: how many envelopes a read opened."""

    def __init__(self, key: bytes) -> None:
        self._cipher = AESGCM(key)
        self.decrypts = 0

    def encrypt(self, nonce: bytes, data: bytes, associated: bytes) -> bytes:
        return self._cipher.encrypt(nonce, data, associated)

    def decrypt(self, nonce: bytes, data: bytes, associated: bytes) -> bytes:
        self.decrypts += 1
        return self._cipher.decrypt(nonce, data, associated)


APPEND_PAYLOADS: list[Payload | None] = [
    JsonPayload(b'{"n":1e400}'),
    None,
    TextPayload("é"),
    BinaryPayload(b"KJE2"),  # a payload that looks like the reference stays itself
    BinaryPayload(b""),
]


def sealed_append(sealer: Sealer, first: int = 1) -> tuple[Event, ...]:
    """The Append as Kafka and the store hold it: sealed, encoded, decoded."""
    events = [Event(first + i, frozenset({"tag"}), p) for i, p in enumerate(APPEND_PAYLOADS)]
    value = encode_events_binary(Events(sealer.events(events)))
    return decode_events_binary(value).events


def test_an_append_is_sealed_once_and_its_value_holds_one_envelope() -> None:
    key = new_data_key()
    cipher = AESGCM(key)
    sealed = Sealer(cipher, "j", key_id=data_key_id(key)).events(
        [Event(i + 1, payload=p) for i, p in enumerate(APPEND_PAYLOADS)]
    )
    assert isinstance(sealed[0].payload, BinaryPayload)
    assert is_append_envelope(sealed[0].payload.value)
    assert [e.payload for e in sealed[1:]] == [None, *[BinaryPayload(APPEND_REF)] * 3]
    value = encode_events_binary(Events(sealed))
    assert value.count(b"KJE2") == 4 and b"KJE1" not in value and "é".encode() not in value
    # no payload at all: nothing to seal
    bare = (Event(1), Event(2))
    assert Sealer(cipher, "j").events(bare) == bare


def test_a_read_opens_one_envelope_an_append_whatever_its_slice() -> None:
    """Decoded, every event of the Append holds the one envelope; a read opens it once and each
    event takes its entry: a slice above a Delete inside the Append (or below a `to`) reads
    right, and the next page's events of the same Append cost no second decrypt."""
    key = new_data_key()
    cipher = CountingCipher(key)
    sealer = Sealer(cipher, "j", key_id=data_key_id(key))  # type: ignore[arg-type]
    opener = Opener(cipher, "j", key_id=data_key_id(key))  # type: ignore[arg-type]
    records = [_record(e.seq_nr, e.payload) for e in sealed_append(sealer, first=11)]
    expected = [_record(11 + i, p) for i, p in enumerate(APPEND_PAYLOADS)]
    last = OpenedAppend()
    assert opener.records(records[2:4], last) == expected[2:4]  # deleteTo 12, to 14
    assert opener.records(records[4:], last) == expected[4:]  # the next page
    assert cipher.decrypts == 1
    assert opener.records(records) == expected  # a fresh read: once more
    assert cipher.decrypts == 2


def test_an_append_envelope_refuses_another_journal_range_key_or_tampering() -> None:
    key = new_data_key()
    cipher = AESGCM(key)
    key_id = data_key_id(key)
    events = sealed_append(Sealer(cipher, "j", key_id=key_id))
    envelope = events[0].payload
    assert isinstance(envelope, BinaryPayload)
    value = envelope.value
    tampered = value[:-1] + bytes([value[-1] ^ 1])
    moved_range = value[:12] + (5).to_bytes(8, "big") + value[20:]
    other = new_data_key()
    for opener, record in (
        (Opener(cipher, "k", key_id=key_id), _record(1, envelope)),  # another journal
        (Opener(cipher, "j", key_id=key_id), _record(1, BinaryPayload(tampered))),
        (Opener(cipher, "j", key_id=key_id), _record(5, BinaryPayload(moved_range))),
        (Opener(cipher, "j", key_id=key_id), _record(9, envelope)),  # outside its range
        (Opener(cipher, "j", key_id=key_id), _record(2, envelope)),  # an event without payload
        (Opener(AESGCM(other), "j", key_id=data_key_id(other)), _record(1, envelope)),
        (Opener(AESGCM(other), "j", key_id=key_id), _record(1, envelope)),
    ):
        with pytest.raises(EnvelopeRefused, match="seqNr"):
            opener.records([record])


def test_version_1_envelopes_and_plain_payloads_still_open_beside_version_2() -> None:
    key = new_data_key()
    cipher = AESGCM(key)
    key_id = data_key_id(key)
    old = [_record(1, seal(cipher, "j", 1, TextPayload("old"))), _record(2, None)]
    sealer = Sealer(cipher, "j", key_id=key_id)
    new = [_record(e.seq_nr, e.payload) for e in sealed_append(sealer, 3)]
    plain = [_record(8, BinaryPayload(b"KJE2"))]  # a plain Append: no envelope in its record
    opened = Opener(cipher, "j", key_id=key_id).records(old + new + plain)
    expected = [TextPayload("old"), None, *APPEND_PAYLOADS, BinaryPayload(b"KJE2")]
    assert [r.event.payload for r in opened] == expected


def test_a_plain_record_of_reference_bytes_decodes_as_it_is() -> None:
    events = (Event(1, payload=BinaryPayload(b"KJE2")), Event(2, payload=BinaryPayload(b"KJE2")))
    assert decode_events_binary(encode_events_binary(Events(events))).events == events


async def test_rotation_keeps_an_append_envelope_opening() -> None:
    store = MemoryKeyStore()
    old, new = FileKek.of_text(new_kek_text()), FileKek.of_text(new_kek_text())
    key = JournalKey("t", "a")
    data_key = await DataKeys(store, old).for_append(key)
    events = data_key.sealer.events([Event(1, payload=TextPayload("x")), Event(2)])
    assert await DataKeys(store, new, old_keks=[old]).rotate("t") == (1, 0)
    opened = await DataKeys(store, new).for_read(key)
    assert opened is not None
    records = [_record(e.seq_nr, e.payload) for e in events]
    assert [r.event.payload for r in opened.opener.records(records)] == [TextPayload("x"), None]


async def test_a_deployment_may_keep_sealing_event_by_event_for_a_rolling_upgrade() -> None:
    """`seal_appends_once` false (KJ_SEAL_APPENDS_ONCE): version 1, which the code before version 2
    reads; both versions open with the same key."""
    data_key = await DataKeys(MemoryKeyStore(), FileKek.of_text(new_kek_text())).for_append(
        JournalKey("t", "a")
    )
    events = [Event(1, payload=TextPayload("x")), Event(2), Event(3, payload=TextPayload("y"))]
    assert Settings(seal_appends_once=False).seal_appends_once is False
    assert Settings().seal_appends_once is True
    for once, sealed in ((False, is_sealed), (True, is_append_envelope_payload)):
        values = seal_events(data_key, events, once)
        assert sealed(values[0].payload)
        decoded = decode_events_binary(encode_events_binary(Events(values))).events
        records = [_record(e.seq_nr, e.payload) for e in decoded]
        assert [r.event.payload for r in data_key.opener.records(records)] == [
            e.payload for e in events
        ]


def is_append_envelope_payload(payload: Payload | None) -> bool:
    return isinstance(payload, BinaryPayload) and is_append_envelope(payload.value)


def _outcome(decode: Callable[[], Sequence[Event]]) -> list[Event] | type[Exception]:
    try:
        return list(decode())
    except (DecodeError, InvalidValue, EnvelopeRefused, UnicodeDecodeError) as error:
        return type(error)


def test_the_decoder_opens_each_event_as_it_builds_it_as_the_opener_did_after() -> None:
    """`decode_events_binary` with an opener (every read's decode): the events of a version 2
    Append, of version 1 envelopes and of plain payloads, each built once with its clear
    payload, the same as decoding and then opening them (`Opener.records`), whatever the slice
    of the Append the record holds (an export's import keeps its tail)."""
    key = new_data_key()
    cipher = CountingCipher(key)
    key_id = data_key_id(key)
    sealer = Sealer(cipher, "j", key_id=key_id)  # type: ignore[arg-type]
    opener = Opener(cipher, "j", key_id=key_id)  # type: ignore[arg-type]
    clear = tuple(Event(11 + i, frozenset({"tag"}), p) for i, p in enumerate(APPEND_PAYLOADS))
    sealed = sealer.events(clear)  # as written: the envelope, then references
    value = encode_events_binary(Events(sealed))
    cipher.decrypts = 0
    assert decode_events_binary(value, opener).events == clear
    assert cipher.decrypts == 1  # the Append's one envelope, once
    tail = encode_events_binary(
        Events((replace(sealed[2], payload=sealed[0].payload), *sealed[3:]))
    )
    assert decode_events_binary(tail, opener).events == clear[2:]
    v1 = (
        Event(1, payload=seal(cipher, "j", 1, TextPayload("old"))),  # type: ignore[arg-type]
        Event(2),
        Event(3, payload=BinaryPayload(b"KJE2")),
    )
    decoded = decode_events_binary(encode_events_binary(Events(v1)), opener).events
    assert [e.payload for e in decoded] == [TextPayload("old"), None, BinaryPayload(b"KJE2")]
    plain = Events((Event(1, payload=BinaryPayload(b"KJE2")), Event(2, payload=JsonPayload(b"1"))))
    assert decode_events_binary(encode_events_binary(plain), opener) == plain


def test_the_decoder_names_a_fault_before_it_refuses_and_refuses_as_the_opener_did() -> None:
    """Every byte of a sealed Append's value changed, and every cut: the decode with an opener
    raises the fault the decode without it names (DecodeError, ...), or for seqNrs that are not
    consecutive InvalidValue (an entry is the event at seqNr - first); otherwise it answers
    what decoding and then opening answered: the same events, or EnvelopeRefused."""
    key = new_data_key()
    cipher = AESGCM(key)
    key_id = data_key_id(key)
    opener = Opener(cipher, "j", key_id=key_id)
    events = [Event(i + 1, frozenset({"tag"}), p) for i, p in enumerate(APPEND_PAYLOADS)]
    value = encode_events_binary(Events(Sealer(cipher, "j", key_id=key_id).events(events)))
    refused = 0
    for at in range(len(value)):
        flipped = value[:at] + bytes([value[at] ^ 0x41]) + value[at + 1 :]
        for broken in (value[:at], flipped):
            without = _outcome(lambda: decode_events_binary(broken).events)  # noqa: B023
            with_key = _outcome(lambda: decode_events_binary(broken, opener).events)  # noqa: B023
            if not isinstance(without, list):
                assert with_key is without, at
            elif [e.seq_nr for e in without] != list(range(1, len(without) + 1)):
                assert with_key is InvalidValue, at
            else:
                records = [
                    EventRecord(e, datetime(2026, 11, 28, tzinfo=UTC), 2, 1) for e in without
                ]
                opened = _outcome(lambda: [r.event for r in opener.records(records)])  # noqa: B023
                assert with_key == opened, at
                refused += opened is EnvelopeRefused
    assert refused > 0  # the ciphertext's bytes, at least
