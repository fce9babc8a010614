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

`next` is the last id the page examined when more may follow (pass it as `after`); a page may
then be short, even empty, when the journals it examined were purged: keep going until `next`
is None.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from journal.client.reading import ReadingFlow
from journal.core.model import JournalKey
from journal.errors import InvalidValue
from journal.kafka.keys import PartitionKeys
from journal.kafka.writer import FenceFloor
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
    ) -> None:
        """`floor`: the process's (its writer's), so that a page fences above its acks."""
        self._keys = PartitionKeys(kafka, topic, timeout_s)
        self._floor = FenceFloor() if floor is None else floor
        self._topic = topic
        self._partitions = partitions
        self._store = reading.store
        self._index = reading.index
        self._head = reading.head

    async def page(self, prefix: str, after: str | None, limit: int) -> JournalIdPage:
        check_page(limit)
        candidates = {
            c
            for c in await self._candidates()
            if c.startswith(prefix) and (after is None or c > after)
        }
        stored = await self._store.journal_ids(self._topic, prefix, after, limit)
        # a full page of the store's may be followed by stored ids it did not return: the
        # candidates past it wait for the next page
        bound = stored[-1] if len(stored) == limit else None
        merged = sorted({*stored, *(c for c in candidates if bound is None or c <= bound)})
        ids: list[str] = []
        examined = 0
        while len(ids) < limit and examined < len(merged):
            chunk = merged[examined : examined + limit - len(ids)]
            examined += len(chunk)
            listed = await self._decide(chunk, candidates)
            ids.extend(i for i, exists in zip(chunk, listed, strict=True) if exists)
        more = examined < len(merged) or bound is not None
        return JournalIdPage(tuple(ids), merged[examined - 1] if more and examined else None)

    async def _candidates(self) -> set[str]:
        partitions = self._partitions
        ends = {
            p: self._floor.raise_to(p, end)
            for p, end in (await self._keys.ends(partitions)).items()
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
            for partition in unknown:
                after = pointers.get(partition, -1)
                candidates |= await self._keys.ids(partition, after, ends[partition])
        return candidates

    async def _decide(self, chunk: list[str], candidates: set[str]) -> list[bool]:
        """Whether each id of `chunk` exists: candidates by their view, the rest as stored."""
        slots = asyncio.Semaphore(_VIEWS_IN_FLIGHT)

        async def exists(journal_id: str) -> bool:
            if journal_id not in candidates:
                return True
            async with slots:
                head = await self._head(JournalKey(self._topic, journal_id))
            return head.state.exists

        return list(await asyncio.gather(*(exists(i) for i in chunk)))

    async def close(self) -> None:
        await self._keys.close()
