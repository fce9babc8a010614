"""Journal ids: pages of the ids of a topic's journals that exist, replicated or not yet.

A page merges two sources, both as of one fence per partition (its high watermark, one
ListOffsets for all: acks=all puts every acknowledged action below it; never below the
process's `FenceFloor`, as a read's fence):
- the store's `journal_ids` (kept by replication: journal/store/schema.py);
- candidates: ids whose records the store may not reflect yet. The direct client's tail index
  knows them per partition (the keys of unreplicated records). Where no index can tell (a
  worker, or the tail index behind, past its bound, or past an expired or undecodable batch)
  they are the keys of the partition's records between the store's pointer and the fence,
  read from Kafka keys-only (`journal.kafka.keys`).
A candidate is decided by the reading flow (`Journals.view`, the one fold): listed if its state
`exists`. So a journal purged, or with rejected Appends only, is never listed, whether that
is replicated yet or not; a stored id that is no candidate is listed as the store has it.
Order: fences, candidates, then the store's page, which therefore reflects at least what the
candidates' source left out as replicated: no journal falls between the two.

Why a worker reads keys from Kafka rather than asking its tables or the partitions' owners:
its tables cover only the partitions it owns, and they keep a key for every journal they ever
saw (a value is pruned only when rewritten), so listing from them reads every journal of those
partitions, in no id order; forwarding per partition to each owner adds a fan-out whose
failures (an owner restarting, a rebalance) need fallbacks anyway. The records between the
store's pointer and the high watermark are exactly the unreplicated ones: reading their keys
costs what replication lags behind (nothing when it keeps up), is right on any worker,
owner or not, and is the fallback a non-owner's read already uses. Records that expired
before replication stored them have keys nobody can know: the scan starts at the log start
(reads of those journals answer 410).

A grown topic (docs/growing.md) lists its successors' journals too: a journal moved by a grow
is listed in the newest topic where it has a row, and a journal created after the grow only
there. So a page merges every topic of the chain: the store's ids of each, the candidates of
each (a successor's from its keys between its pointers and its fences); a candidate is decided
by the journal's view, which follows it along the chain; a stored id by the newest topic
listing it, unless a later topic has a row of it that does not list it (purged there, say:
a read of each such row, and none for a topic that never grew).

`next` is the last id the page examined when more may follow (pass it as `after`); a page may
then be short, even empty, when the journals it examined were purged: keep going until `next`
is None.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from journal.client.reading import ReadingFlow
from journal.core.grow import SEAL_ID
from journal.core.model import JournalKey
from journal.errors import InvalidValue
from journal.kafka.keys import PartitionKeys
from journal.kafka.writer import FenceFloor
from journal.store.base import JournalMeta
from kjconfig.access import KafkaAccess

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_VIEWS_IN_FLIGHT = 16  # candidates decided at once


@dataclass(frozen=True, slots=True)
class JournalIdPage:
    """Ids in ascending order; `next`: pass it as `after` for the next page (None: the end)."""

    ids: tuple[str, ...]
    next: str | None


def check_page(limit: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidValue(f"limit must be in 1..{MAX_LIMIT}, got {limit}")


@runtime_checkable
class UnreplicatedIds(Protocol):
    """An index that knows the ids of a partition's unreplicated records (journal/kafka/tail.py)."""

    async def unreplicated_ids(self, partition: int, fence: int) -> Collection[str] | None:
        """Every id with records below `fence` the store may lack (more may come: they are
        candidates), or None when it cannot tell."""
        ...


@dataclass(frozen=True, slots=True)
class Successor:
    """A topic the listed one grew into, directly or along a chain (docs/growing.md), with the
    fence floor of the process's writer there (a fresh one where it never wrote)."""

    topic: str
    partitions: int
    floor: FenceFloor


class JournalIds:
    """Pages of a topic's journal ids (see the module), from the keys of its `partitions` in
    Kafka, and the client's reading flow: the store's ids and pointers, its index, its
    reads."""

    def __init__(
        self,
        topic: str,
        partitions: int,
        kafka: KafkaAccess,
        timeout_s: float,
        reading: ReadingFlow,
        floor: FenceFloor | None = None,
        exists: Callable[[str], Awaitable[bool]] | None = None,
        successors: Callable[[], Awaitable[Sequence[Successor]]] | None = None,
    ) -> None:
        """`floor`: the process's (its writer's), so that a page fences above its acks.
        `exists`: whether a journal exists, following it along the topic's grows (None: the
        reading flow's view here); `successors`: the topics the topic grew into, read for each
        page (None: it never grows)."""
        self._kafka, self._timeout_s = kafka, timeout_s
        self._keys = {topic: PartitionKeys(kafka, topic, timeout_s)}
        self._floor = FenceFloor() if floor is None else floor
        self._topic = topic
        self._partitions = partitions
        self._store = reading.store
        self._index = reading.index
        self._head = reading.head
        self._exists = exists
        self._successors = successors

    async def page(self, prefix: str, after: str | None, limit: int) -> JournalIdPage:
        check_page(limit)
        successors = [] if self._successors is None else list(await self._successors())
        found = await self._candidates()
        for successor in successors:
            found |= await self._unreplicated(successor)
        found.discard(SEAL_ID)  # a grow's Seal: a key of the log, never a journal
        candidates = {c for c in found if c.startswith(prefix) and (after is None or c > after)}
        topics = [self._topic, *(s.topic for s in successors)]
        pages = [await self._store.journal_ids(t, prefix, after, limit) for t in topics]
        # a full page of the store's may be followed by stored ids it did not return: the ids
        # past the lowest such end (candidates, other topics' ids) wait for the next page
        ends = [page[-1] for page in pages if len(page) == limit]
        bound = min(ends) if ends else None
        listed_in: dict[str, int] = {}  # the newest topic listing each stored id
        for at, page in enumerate(pages):
            listed_in |= {i: at for i in page if bound is None or i <= bound}
        merged = sorted({*listed_in, *(c for c in candidates if bound is None or c <= bound)})
        ids: list[str] = []
        examined = 0
        while len(ids) < limit and examined < len(merged):
            chunk = merged[examined : examined + limit - len(ids)]
            examined += len(chunk)
            listed = await self._decide(chunk, candidates, listed_in, topics)
            ids.extend(i for i, exists in zip(chunk, listed, strict=True) if exists)
        more = examined < len(merged) or bound is not None
        return JournalIdPage(tuple(ids), merged[examined - 1] if more and examined else None)

    async def _unreplicated(self, successor: Successor) -> set[str]:
        """The ids of a successor's records its store may not reflect yet: its keys between
        its pointers and its fences."""
        topic = successor.topic
        keys = self._keys.get(topic)
        if keys is None:
            keys = self._keys[topic] = PartitionKeys(self._kafka, topic, self._timeout_s)
        ends = await keys.ends(successor.partitions)
        pointers = await self._store.pointers(topic)
        found: set[str] = set()
        for partition in range(successor.partitions):
            fence = successor.floor.raise_to(partition, ends[partition])
            found |= await keys.ids(partition, pointers.get(partition, -1), fence)
        return found

    async def _candidates(self) -> set[str]:
        partitions = self._partitions
        ends = {
            p: self._floor.raise_to(p, end)
            for p, end in (await self._keys[self._topic].ends(partitions)).items()
        }
        index = self._index
        candidates: set[str] = set()
        unknown: list[int] = []
        for partition in range(partitions):
            known = None
            if isinstance(index, UnreplicatedIds):
                known = await index.unreplicated_ids(partition, ends[partition])
            if known is None:
                unknown.append(partition)
            else:
                candidates.update(known)
        if unknown:
            pointers = await self._store.pointers(self._topic)
            keys = self._keys[self._topic]
            for partition in unknown:
                after = pointers.get(partition, -1)
                candidates |= await keys.ids(partition, after, ends[partition])
        return candidates

    async def _decide(
        self,
        chunk: list[str],
        candidates: set[str],
        listed_in: dict[str, int],
        topics: list[str],
    ) -> list[bool]:
        """Whether each id of `chunk` exists: candidates by their view, the rest as the newest
        topic listing them has them, unless a later topic has a row of theirs (which that
        topic's listing left out)."""
        later = [
            JournalKey(topic, i)
            for i in chunk
            if i not in candidates
            for topic in topics[listed_in[i] + 1 :]
        ]
        slots = asyncio.Semaphore(_VIEWS_IN_FLIGHT)

        async def row(key: JournalKey) -> JournalMeta | None:
            async with slots:
                return await self._store.meta(key)

        rows = await asyncio.gather(*(row(key) for key in later))
        moved_on = {key.id for key, meta in zip(later, rows, strict=True) if meta is not None}

        async def exists(journal_id: str) -> bool:
            if journal_id not in candidates:
                return journal_id not in moved_on
            async with slots:
                if self._exists is not None:
                    return await self._exists(journal_id)
                head = await self._head(JournalKey(self._topic, journal_id))
            return head.state.exists

        return list(await asyncio.gather(*(exists(i) for i in chunk)))

    async def close(self) -> None:
        for keys in self._keys.values():
            await keys.close()
