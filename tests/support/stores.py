"""Test doubles of the store's read side."""

from __future__ import annotations

from collections.abc import AsyncIterator

from journal.core.grow import Grow
from journal.core.model import SEQ_NR_MAX, EventRecord, JournalKey
from journal.store.base import EventualJournal, JournalMeta


class DelegatingJournal(EventualJournal):
    """`store`'s read side, each method passed on to it: a double overrides what it changes.
    `first_page` stays the base's (it reads nothing ahead): every read goes through `read`."""

    def __init__(self, store: EventualJournal) -> None:
        self.store = store

    async def pointer(self, topic: str, partition: int) -> int | None:
        return await self.store.pointer(topic, partition)

    async def pointers(self, topic: str) -> dict[int, int]:
        return await self.store.pointers(topic)

    async def grow(self, topic: str) -> Grow | None:
        return await self.store.grow(topic)

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        return await self.store.journal_ids(topic, prefix, after, limit)

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        return await self.store.meta(key)

    def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        return self.store.read(key, meta, from_, to)
