"""The journals' data keys (docs/erasure.md): where they are kept, wrapped by the
key-encryption key (`journal_keys`, a table of the store's keyspace, journal/store/schema.py),
and the bounded cache every process reads them through (`DataKeys`).

A journal's row goes through `active` -> `erasing` -> `erased`, each step a lightweight
transaction (Paxos in Cassandra), so two processes never disagree on it:
- `active`: the wrapped data key; made by the first append of an encrypting process
  (`INSERT ... IF NOT EXISTS`: two writers racing get the same key);
- `erasing`: an erasure began: the journal neither reads nor appends any more, its key is kept
  until its rows are purged (so a failed erasure is resumed, never half done);
- `erased`: the wrapped key is overwritten with null (`destroy`); the id stays erased.
A journal without a row has no key: its payloads are plain.

A row is keyed by the journal's identity (`key_identity`): the first topic of its chain of grows
(docs/growing.md) and its id, so a moved journal's events in every topic of the chain are
sealed with one key, and its erasure destroys that one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from cassandra.query import SimpleStatement
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from journal.codec.envelope import (
    EnvelopeRefused,
    Kek,
    Opener,
    Sealer,
    data_key_id,
    new_data_key,
)
from journal.core.model import JournalKey
from journal.errors import JournalErased, SetupMissing
from journal.store import cql
from journal.store.cassandra import KeyspaceAccess


class KeyState(StrEnum):
    ACTIVE = "active"
    ERASING = "erasing"
    ERASED = "erased"


@dataclass(frozen=True, slots=True)
class KeyRow:
    state: KeyState
    wrapped: bytes | None = None
    kek_id: str | None = None


class KeyStore(Protocol):
    """Where the wrapped data keys are kept; every change is conditional on the row's state."""

    async def get(self, key: JournalKey) -> KeyRow | None: ...

    async def create(self, key: JournalKey, wrapped: bytes, kek_id: str) -> KeyRow:
        """An active row with `wrapped` if the journal has none; the row it has, either way."""
        ...

    async def mark_erasing(self, key: JournalKey) -> KeyRow:
        """`erasing` if absent or active; the row after (erasing or erased)."""
        ...

    async def destroy(self, key: JournalKey) -> None:
        """`erasing` -> `erased`, the wrapped key overwritten."""
        ...

    async def rewrap(self, key: JournalKey, old_kek_id: str, wrapped: bytes, kek_id: str) -> bool:
        """An active row wrapped by `old_kek_id` wrapped anew; False if the row changed."""
        ...

    def rows(self, topic: str) -> AsyncIterator[tuple[JournalKey, KeyRow]]:
        """Every row of `topic` (a rotation's scan)."""
        ...


def key_identity(key: JournalKey, predecessors: Mapping[str, str]) -> JournalKey:
    """The journal whose data key seals `key`'s events: the same id under the first topic of
    `key.topic`'s chain of grows (`predecessors`: each grown topic's old topic, as the registry
    has them). One key per journal across the chain: a moved journal's events in OLD and in NEW
    open with it, and erasing it reaches every topic; a subscription, which names a moved
    journal by the first topic already, finds the same row. The one place this is decided."""
    topic = key.topic
    for _ in range(len(predecessors)):  # a chain visits each topic once
        older = predecessors.get(topic)
        if older is None:
            break
        topic = older
    return key if topic == key.topic else JournalKey(topic, key.id)


def _row(row: Any) -> KeyRow:
    return KeyRow(KeyState(row.state), row.wrapped, row.kek_id)


class CassandraKeyStore:
    """`journal_keys` on the store's session (`access`: the store's `keyspace_access`, asked on
    each call: a store that connects later is reached then)."""

    def __init__(self, access: Callable[[], KeyspaceAccess]) -> None:
        self._access = access
        self._statements: dict[str, SimpleStatement] = {}

    def _run(self, query: str, params: Sequence[object]) -> Any:
        access = self._access()
        statement = self._statements.get(query)
        if statement is None:
            statement = SimpleStatement(query.format(ks=access.keyspace))
            if not query.startswith("SELECT"):  # the transactions commit at the write level
                statement.consistency_level = access.write_level
            self._statements[query] = statement
        return cql.execute(access.session, statement, params)

    async def get(self, key: JournalKey) -> KeyRow | None:
        rows = await self._run(
            "SELECT state, wrapped, kek_id FROM {ks}.journal_keys WHERE topic = %s AND id = %s",
            (key.topic, key.id),
        )
        return _row(rows[0]) if rows else None

    async def create(self, key: JournalKey, wrapped: bytes, kek_id: str) -> KeyRow:
        rows = await self._run(
            "INSERT INTO {ks}.journal_keys (topic, id, state, wrapped, kek_id, created_at) "
            "VALUES (%s, %s, 'active', %s, %s, toTimestamp(now())) IF NOT EXISTS",
            (key.topic, key.id, wrapped, kek_id),
        )
        if rows[0].applied:
            return KeyRow(KeyState.ACTIVE, wrapped, kek_id)
        return _row(rows[0])

    async def mark_erasing(self, key: JournalKey) -> KeyRow:
        for _ in range(3):  # absent -> erasing, or active -> erasing; each may lose one race
            rows = await self._run(
                "INSERT INTO {ks}.journal_keys (topic, id, state, erasing_at) "
                "VALUES (%s, %s, 'erasing', toTimestamp(now())) IF NOT EXISTS",
                (key.topic, key.id),
            )
            if rows[0].applied:
                return KeyRow(KeyState.ERASING)
            found = _row(rows[0])
            if found.state is not KeyState.ACTIVE:
                return found
            rows = await self._run(
                "UPDATE {ks}.journal_keys SET state = 'erasing', erasing_at = toTimestamp(now()) "
                "WHERE topic = %s AND id = %s IF state = 'active'",
                (key.topic, key.id),
            )
            if rows[0].applied:
                return KeyRow(KeyState.ERASING, found.wrapped, found.kek_id)
        raise JournalErased(f"journal {key.id!r}: its key row kept changing; erase it again")

    async def destroy(self, key: JournalKey) -> None:
        await self._run(
            "UPDATE {ks}.journal_keys SET state = 'erased', wrapped = null, "
            "erased_at = toTimestamp(now()) WHERE topic = %s AND id = %s IF state = 'erasing'",
            (key.topic, key.id),
        )

    async def rewrap(self, key: JournalKey, old_kek_id: str, wrapped: bytes, kek_id: str) -> bool:
        rows = await self._run(
            "UPDATE {ks}.journal_keys SET wrapped = %s, kek_id = %s "
            "WHERE topic = %s AND id = %s IF state = 'active' AND kek_id = %s",
            (wrapped, kek_id, key.topic, key.id, old_kek_id),
        )
        return bool(rows[0].applied)

    async def rows(self, topic: str) -> AsyncIterator[tuple[JournalKey, KeyRow]]:
        access = self._access()
        query = f"SELECT topic, id, state, wrapped, kek_id FROM {access.keyspace}.journal_keys"
        async for row in cql.stream(access.session, query):  # paged: bounded memory
            if row.topic == topic:
                yield JournalKey(row.topic, row.id), _row(row)


def keyspace_access_of(store: object) -> KeyspaceAccess:
    """The keyspace of a Cassandra store (`CassandraStore`, or a `ConnectingStore` once it
    reached one); StoreUnavailable before."""
    access: KeyspaceAccess | None = getattr(store, "keyspace_access", None)
    if access is None:
        raise SetupMissing("encrypted journals need a Cassandra store for their keys")
    return access


class MemoryKeyStore:
    """`KeyStore` in process memory: for unit tests."""

    def __init__(self) -> None:
        self.keys: dict[JournalKey, KeyRow] = {}

    async def get(self, key: JournalKey) -> KeyRow | None:
        return self.keys.get(key)

    async def create(self, key: JournalKey, wrapped: bytes, kek_id: str) -> KeyRow:
        return self.keys.setdefault(key, KeyRow(KeyState.ACTIVE, wrapped, kek_id))

    async def mark_erasing(self, key: JournalKey) -> KeyRow:
        found = self.keys.get(key)
        if found is None or found.state is KeyState.ACTIVE:
            wrapped, kek_id = (None, None) if found is None else (found.wrapped, found.kek_id)
            found = self.keys[key] = KeyRow(KeyState.ERASING, wrapped, kek_id)
        return found

    async def destroy(self, key: JournalKey) -> None:
        found = self.keys.get(key)
        if found is not None and found.state is KeyState.ERASING:
            self.keys[key] = KeyRow(KeyState.ERASED)

    async def rewrap(self, key: JournalKey, old_kek_id: str, wrapped: bytes, kek_id: str) -> bool:
        found = self.keys.get(key)
        if found is None or found.state is not KeyState.ACTIVE or found.kek_id != old_kek_id:
            return False
        self.keys[key] = KeyRow(KeyState.ACTIVE, wrapped, kek_id)
        return True

    async def rows(self, topic: str) -> AsyncIterator[tuple[JournalKey, KeyRow]]:
        for key, row in list(self.keys.items()):
            if key.topic == topic:
                yield key, row


@dataclass(frozen=True, slots=True)
class DataKey:
    """A journal's data key, unwrapped: its cipher, the key itself for digests, and what opens
    and seals the journal's events (made once a cached key, not once a read or an event)."""

    raw: bytes
    cipher: AESGCM
    opener: Opener
    sealer: Sealer


def context(key: JournalKey) -> bytes:
    """The associated data a data key is wrapped with: its journal."""
    return f"{key.topic}\x00{key.id}".encode()


_NO_KEY = object()  # cached: the journal has no key (plain)


class DataKeys:
    """The journals' data keys through a cache of `cache_size` journals (least recently used
    out first), each entry trusted for `ttl_s`: after an erasure elsewhere, a process may use a
    key it cached for that long at most (the erasing process forgets it at once). An erased
    journal is cached until pushed out: an erasure is final.

    `kek` wraps new keys; `old_keks` only unwrap (during a rotation, docs/erasure.md).
    """

    def __init__(
        self,
        store: KeyStore,
        kek: Kek,
        old_keks: Sequence[Kek] = (),
        cache_size: int = 10_000,
        ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.kek = kek
        self._keks = {k.id: k for k in (*old_keks, kek)}
        self._cache: OrderedDict[JournalKey, tuple[float, object]] = OrderedDict()
        self._size = cache_size
        self._ttl_s = ttl_s
        self._clock = clock
        self._predecessors: dict[str, str] = {}  # a grown topic -> the topic it grew from

    def follow(self, old_topic: str, new_topic: str) -> None:
        """`new_topic` grew from `old_topic` (the registry's record): its journals' keys are
        those of the chain's first topic (`key_identity`). Told before any key of `new_topic`
        is asked for: by the `Journals` that builds the successor, by an export from the
        registry."""
        self._predecessors[new_topic] = old_topic

    def identity(self, key: JournalKey) -> JournalKey:
        """The row `key`'s data key is kept under (`key_identity`)."""
        return key_identity(key, self._predecessors) if self._predecessors else key

    def __len__(self) -> int:
        """Journals cached now."""
        return len(self._cache)

    def _cached(self, key: JournalKey) -> object | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires, value = entry
        if not isinstance(value, KeyState) and expires < self._clock():
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return value

    def _remember(self, key: JournalKey, value: object) -> object:
        self._cache[key] = (self._clock() + self._ttl_s, value)
        self._cache.move_to_end(key)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return value

    def forget(self, key: JournalKey) -> None:
        self._cache.pop(self.identity(key), None)

    def _of_row(self, key: JournalKey, row: KeyRow | None) -> object:
        if row is None:
            return _NO_KEY
        if row.state is not KeyState.ACTIVE or row.wrapped is None:
            return row.state
        kek = self._keks.get(row.kek_id or "")
        if kek is None:
            raise EnvelopeRefused(
                f"journal {key.id!r}: its data key is wrapped by the KEK {row.kek_id}, which "
                "this process is not given (KJ_KEK_FILE, KJ_KEK_OLD_FILE)"
            )
        raw = kek.unwrap(row.wrapped, context(key))
        cipher = AESGCM(raw)
        key_id = data_key_id(raw)
        return DataKey(
            raw,
            cipher,
            Opener(cipher, key.id, key_id=key_id),
            Sealer(cipher, key.id, key_id=key_id),
        )

    @staticmethod
    def _usable(key: JournalKey, value: object) -> DataKey | None:
        if isinstance(value, KeyState):
            raise JournalErased(f"journal {key.id!r} is {value.value}: its payloads are gone")
        return value if isinstance(value, DataKey) else None

    async def for_read(self, key: JournalKey) -> DataKey | None:
        """The journal's key; None if it has none (plain). JournalErased once an erasure began."""
        key = self.identity(key)
        value = self._cached(key)
        if value is None:
            value = self._remember(key, self._of_row(key, await self.store.get(key)))
        return self._usable(key, value)

    async def for_reads(
        self, keys: Collection[JournalKey]
    ) -> dict[JournalKey, DataKey | JournalErased | EnvelopeRefused | None]:
        """`for_read` of many journals (a subscription's fetch): the cached ones answered at
        once, the others read together, concurrently; a journal's JournalErased (or
        EnvelopeRefused: its key's KEK not given) as its answer. StoreUnavailable raised."""
        found: dict[JournalKey, DataKey | JournalErased | EnvelopeRefused | None] = {}
        missing: list[JournalKey] = []
        for key in keys:
            value = self._cached(self.identity(key))
            if value is None:
                missing.append(key)
            else:
                try:
                    found[key] = self._usable(key, value)
                except JournalErased as erased:
                    found[key] = erased
        # a task a journal costs ~5-17 us: only for the journals not cached
        read = await asyncio.gather(*(self.for_read(k) for k in missing), return_exceptions=True)
        for key, answer in zip(missing, read, strict=True):
            if isinstance(answer, BaseException) and not isinstance(
                answer, (JournalErased, EnvelopeRefused)
            ):
                raise answer
            found[key] = answer
        return found

    async def for_append(self, key: JournalKey) -> DataKey:
        """The journal's key, made now if it has none. JournalErased once an erasure began."""
        # every sealed Append asks: a live cached key answers without `for_read`'s checks
        key = self.identity(key)
        entry = self._cache.get(key)
        if entry is not None and type(entry[1]) is DataKey and entry[0] >= self._clock():
            self._cache.move_to_end(key)
            return entry[1]
        found = await self.for_read(key)
        if found is not None:
            return found
        data_key = new_data_key()
        row = await self.store.create(key, self.kek.wrap(data_key, context(key)), self.kek.id)
        value = self._remember(key, self._of_row(key, row))
        usable = self._usable(key, value)
        assert usable is not None  # an active row always holds a key
        return usable

    async def rotate(self, topic: str) -> tuple[int, int]:
        """Rewrap every active key of `topic` not wrapped by the current KEK with it: (rewrapped,
        already current). Events are untouched: the data keys stay the same."""
        rewrapped = current = 0
        async for key, row in self.store.rows(topic):
            if row.state is not KeyState.ACTIVE or row.wrapped is None:
                continue
            if row.kek_id == self.kek.id:
                current += 1
                continue
            old = self._keks.get(row.kek_id or "")
            if old is None:
                raise EnvelopeRefused(
                    f"journal {key.id!r}: wrapped by the KEK {row.kek_id}, which is not given "
                    "(KJ_KEK_OLD_FILE)"
                )
            raw = old.unwrap(row.wrapped, context(key))
            new = self.kek.wrap(raw, context(key))
            if await self.store.rewrap(key, old.id, new, self.kek.id):
                rewrapped += 1
        return rewrapped, current
