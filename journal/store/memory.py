"""An eventual store in process memory: for unit tests and as the contract's plainest example."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from journal.actions import events_of
from journal.fold import JournalWrite
from journal.model import SEQ_NR_MAX, EventRecord, JournalKey
from journal.store.base import EventualStore, FirstPage, JournalMeta


@dataclass(slots=True)
class _Journal:
    meta: JournalMeta
    events: dict[int, EventRecord] = field(default_factory=dict)


class MemoryStore(EventualStore):
    SEGMENT_SIZE = 0  # it does not segment: its metas carry no segment size, so pages fit
    PAGE_SIZE = 1000

    def __init__(self) -> None:
        self._journals: dict[JournalKey, _Journal] = {}
        self._pointers: dict[tuple[str, int], int] = {}

    async def pointer(self, topic: str, partition: int) -> int | None:
        return self._pointers.get((topic, partition))

    async def pointers(self, topic: str) -> dict[int, int]:
        return {p: o for (t, p), o in self._pointers.items() if t == topic}

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        journal = self._journals.get(key)
        return None if journal is None else journal.meta

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        journal = self._journals.get(key)
        if journal is None:
            return
        start = max(from_, (meta.delete_to or 0) + 1)
        for seq_nr in sorted(s for s in journal.events if start <= s <= to):
            event = journal.events.get(seq_nr)  # may vanish while the caller awaits
            if event is not None:
                yield event

    async def journal_ids(
        self, topic: str, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[str]:
        ids = sorted(
            key.id
            for key, journal in self._journals.items()
            if key.topic == topic
            and journal.meta.state.exists
            and key.id.startswith(prefix)
            and (after is None or key.id > after)
        )
        return ids[:limit]

    async def first_page(self, key: JournalKey, from_: int, to: int) -> FirstPage:
        meta = await self.meta(key)
        if meta is None:
            return FirstPage(self.SEGMENT_SIZE, ())
        events = [r async for r in self.read(key, meta, from_, to)]
        return FirstPage(self.SEGMENT_SIZE, tuple(events[: self.PAGE_SIZE]))

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        return {k: j.meta for k in keys if (j := self._journals.get(k)) is not None}

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        return {w.key: self._apply(w) for w in writes if w.changes_store}

    def _apply(self, write: JournalWrite) -> JournalMeta:
        journal = self._journals.get(write.key)
        if journal is None or write.purge is not None:
            journal = self._journals[write.key] = _Journal(JournalMeta(write.partition, -1))
        for append in write.appends:
            for record in events_of(append):
                journal.events[record.seq_nr] = record
        after = write.after
        journal.events = {s: e for s, e in journal.events.items() if s > after.delete_to}
        journal.meta = JournalMeta(
            write.partition, after.offset, after.seq_nr or None, after.delete_to or None
        )
        return journal.meta

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        current = self._pointers.get((topic, partition), -1)
        self._pointers[(topic, partition)] = max(current, offset)
