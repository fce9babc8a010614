"""Encryption of a journal's payloads and its erasure (crypto-shredding, docs/erasure.md).

Payloads are sealed before they leave the writer (`seal_events`, with the journal's data key,
made at its first append) and opened on every read path as it decodes them (`read_batches`;
subscriptions and groups through `openers`). `erase` runs the erasure's steps in the one order
that is safe to stop anywhere and to run again:

    mark erasing -> purge -> destroy the key -> erased

From the mark on, the journal neither reads nor appends (JournalErased); its key is destroyed
only once the Purge is in the log, and the key row says `erasing` until then, so an erasure
that stopped is reported not done (`erasure_state`) and finished by erasing again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

from msgspec.structs import replace

from journal.codec.envelope import Opener
from journal.core.model import Event, EventRecord, JournalKey, Position
from journal.settings import Settings
from journal.store.keys import (
    CassandraKeyStore,
    DataKey,
    DataKeys,
    KeyState,
    keyspace_access_of,
)
from journal.subscriptions.subscription import UNREADABLE, Found


def data_keys_of(settings: Settings, store: object) -> DataKeys | None:
    """The data keys a process reads through, with `store`'s keyspace (read when first asked:
    a store connecting in the background has it later); None without a key-encryption key."""
    keks = settings.keks()
    if keks is None:
        return None
    return DataKeys(
        CassandraKeyStore(lambda: keyspace_access_of(store)),
        keks[0],
        keks[1],
        settings.key_cache_size,
        settings.key_cache_ttl_s,
    )


def seal_events(data_key: DataKey, events: Sequence[Event], once: bool = True) -> tuple[Event, ...]:
    """An Append's numbered events sealed with its journal's key in one envelope, its seqNr
    range in the associated data (docs/erasure.md, "The envelope"); `once` false: each payload
    alone (version 1, `Settings.seal_appends_once`)."""
    if once:
        return data_key.sealer.events(events)
    seal_payload = data_key.sealer.payload
    return tuple(
        [
            event
            if event.payload is None
            else replace(event, payload=seal_payload(event.seq_nr, event.payload))
            for event in events
        ]
    )


@dataclass(frozen=True, slots=True)
class Erasure:
    """What `erase` did: the Purge's position (None if the journal was erased already)."""

    position: Position | None
    already: bool = False


class Encryption:
    """The journals' data keys as the facade uses them (journal/client/journals.py)."""

    def __init__(self, keys: DataKeys, seal_once: bool = True) -> None:
        self.keys = keys
        self.seal_once = seal_once  # `Settings.seal_appends_once`

    async def read_batches(
        self,
        key: JournalKey,
        read: Callable[[Opener | None], AsyncIterator[list[EventRecord]]],
    ) -> AsyncIterator[list[EventRecord]]:
        """A read's batches, opened: `read` given the opener of the journal's data key (None: a
        journal without a key has only plain payloads), with which the reading flow decodes
        every event, so each is built once with its clear payload (BENCHMARKS.md, "Opened
        inside the decode"). JournalErased (before any batch) once its erasure began: the key
        is looked up once a read."""
        data_key = await self.keys.for_read(key)
        async for batch in read(None if data_key is None else data_key.opener):
            yield batch

    async def openers(self, keys: Collection[JournalKey]) -> dict[JournalKey, Found]:
        """The openers of the journals' data keys, with which subscriptions and groups open
        their payloads as they decode their records (`Openers`): None for a journal without a
        key (plain), UNREADABLE for one whose erasure began or whose key's KEK is not given.
        Through the cache: the journals not cached are read together."""
        return {
            key: UNREADABLE
            if isinstance(answer, Exception)
            else None
            if answer is None
            else answer.opener
            for key, answer in (await self.keys.for_reads(keys)).items()
        }

    async def erasure_state(self, key: JournalKey) -> KeyState | None:
        """The journal's key row as the store has it now (None: no key, not erased)."""
        row = await self.keys.store.get(self.keys.identity(key))
        return None if row is None else row.state

    async def erase(self, key: JournalKey, purge: Callable[[], Awaitable[Position]]) -> Erasure:
        """Erase the journal (module docstring); run again after any failure to finish it.
        Across a grow its one key (`key_identity`) is marked, so from then on it neither reads
        nor appends in any topic of the chain; `purge` follows the journal where it is (a
        Purge that lands after its partition's cut is redone in the grown topic)."""
        keys = self.keys
        key = keys.identity(key)
        row = await keys.store.mark_erasing(key)
        keys.forget(key)
        if row.state is KeyState.ERASED:
            return Erasure(None, already=True)
        position = await purge()  # the rows go as a Purge's do; a repeated Purge is harmless
        await keys.store.destroy(key)
        keys.forget(key)
        return Erasure(position)
