"""The values of the worker's two tables, one of each per journal: small, bounded, pure.

- `Watermark`, the deletion watermark: last seqNr, deleteTo and the offset of the last Purge,
  as of the last action the agent handled.
- `HeadCache`: where the journal's Appends that may not be in the store yet sit in Kafka
  (offset and seqNr range each, after the last Purge). Entries at or below the replicated
  pointer are pruned whenever the value is rewritten, and `pruned_to` remembers that pointer:
  a reader whose own view of the store is older must refresh it first. Past `MAX_ENTRIES` it
  only says `overflow`, and readers scan Kafka instead (by design: values stay small).

Both are updated by `apply(action)`; an action at or below `offset` is ignored, so the agent
can replay records after a restart without changing anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import orjson

from journal.model import ActionRecord, AppendHeader, DeleteHeader, PurgeHeader

MAX_ENTRIES = 64


@dataclass(frozen=True, slots=True)
class Watermark:
    offset: int = -1
    seq_nr: int | None = None
    delete_to: int | None = None
    purge: int | None = None  # offset of the last Purge

    def apply(self, action: ActionRecord) -> Watermark:
        if action.offset <= self.offset:
            return self
        header = action.header
        if isinstance(header, AppendHeader):
            return replace(self, offset=action.offset, seq_nr=header.range.to)
        if isinstance(header, DeleteHeader):
            delete_to = max(header.to, self.delete_to or 0)
            return replace(self, offset=action.offset, delete_to=delete_to)
        if isinstance(header, PurgeHeader):
            return Watermark(offset=action.offset, purge=action.offset)
        return replace(self, offset=action.offset)

    def encode(self) -> bytes:
        return orjson.dumps([self.offset, self.seq_nr, self.delete_to, self.purge])

    @classmethod
    def decode(cls, raw: bytes | None) -> Watermark:
        if not raw:
            return cls()
        offset, seq_nr, delete_to, purge = orjson.loads(raw)
        return cls(offset, seq_nr, delete_to, purge)


@dataclass(frozen=True, slots=True)
class HeadEntry:
    offset: int
    from_: int
    to: int


@dataclass(frozen=True, slots=True)
class HeadCache:
    offset: int = -1
    entries: tuple[HeadEntry, ...] = ()
    overflow: bool = False
    pruned_to: int = -1

    def apply(self, action: ActionRecord, replicated: int) -> HeadCache:
        """Add `action`; drop entries at or below `replicated` (the partition's pointer)."""
        if action.offset <= self.offset:
            return self
        pruned_to = max(self.pruned_to, replicated)
        header = action.header
        if isinstance(header, PurgeHeader):
            return HeadCache(offset=action.offset, pruned_to=pruned_to)
        entries = tuple(e for e in self.entries if e.offset > replicated)
        overflow = self.overflow and bool(entries)
        if isinstance(header, AppendHeader):
            entry = HeadEntry(action.offset, header.range.from_, header.range.to)
            entries = (*entries, entry)
            if len(entries) > MAX_ENTRIES:
                entries, overflow = entries[-MAX_ENTRIES:], True
        return HeadCache(action.offset, entries, overflow, pruned_to)

    def pending(self, replicated: int | None) -> tuple[HeadEntry, ...] | None:
        """The entries a reader must fetch from Kafka, given the pointer it read.

        None when the cache cannot tell: it overflowed, and entries it dropped (all below its
        oldest kept one) may not be replicated yet.
        """
        floor = -1 if replicated is None else replicated
        if self.overflow and self.entries and floor < self.entries[0].offset:
            return None
        return tuple(e for e in self.entries if e.offset > floor)

    def encode(self) -> bytes:
        flat = [[e.offset, e.from_, e.to] for e in self.entries]
        return orjson.dumps([self.offset, flat, self.overflow, self.pruned_to])

    @classmethod
    def decode(cls, raw: bytes | None) -> HeadCache:
        if not raw:
            return cls()
        offset, flat, overflow, pruned_to = orjson.loads(raw)
        entries = tuple(HeadEntry(o, f, t) for o, f, t in flat)
        return cls(offset, entries, overflow, pruned_to)
