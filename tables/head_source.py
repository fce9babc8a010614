"""Journal heads from the owner's tables: no scan of the partition.

Once the owner's agent has processed the reader's Mark, the tables describe the journal up to
it: the watermark gives deleteTo and the last Purge; the head cache lists the Appends that may
be missing from the store, which are then fetched by offset. When this worker does not own
the partition, its agent is too far behind, or the cache overflowed, the Kafka scan answers.

The cache drops entries the agent knows are replicated, and after a crash it may lack some
the store holds (the partition's progress floor). When either lies above the reader's
pointer, the reader's view of the store is too old: the store's pointer is read again (it is
at least as new as both) and the head continues from there.
"""

from __future__ import annotations

from journal.head import Head, HeadReader
from journal.metrics import METRICS
from journal.model import JournalKey
from journal.progress import Progress
from journal.store.base import EventualJournal
from tables.tables import JournalTables


class TableHeadSource:
    def __init__(
        self,
        tables: JournalTables,
        progress: Progress,
        kafka: HeadReader,
        store: EventualJournal,
        wait_s: float,
    ) -> None:
        self._tables = tables
        self._store = store
        self._progress = progress
        self._kafka = kafka
        self._wait_s = wait_s

    async def read(self, key: JournalKey, partition: int, after: int | None, until: int) -> Head:
        if not self._progress.owns(partition) or not await self._progress.wait_for(
            partition, until, self._wait_s
        ):
            METRICS.counter("journal_heads_total", source="kafka_scan").inc()
            return await self._kafka.read(key, partition, after, until)
        cache = self._tables.head_cache(key.id)
        watermark = self._tables.watermark(key.id)  # read together with the cache, before I/O
        fresher = None
        needed = max(cache.pruned_to, self._progress.floor(partition))
        if needed > (-1 if after is None else after):
            fresher = after = await self._store.pointer(key.topic, partition)
        pending = cache.pending(after)
        if pending is None:
            METRICS.counter("journal_heads_total", source="kafka_scan_overflow").inc()
            scanned = await self._kafka.read(key, partition, after, until)
            scanned.after = fresher
            return scanned
        METRICS.counter("journal_heads_total", source="tables").inc()
        offsets = [entry.offset for entry in pending if entry.offset < until]
        head = await self._kafka.read_at(key, partition, offsets) if offsets else Head()
        head.after = fresher
        floor = -1 if after is None else after
        if watermark.purge is not None and watermark.purge > floor:
            head.purged = True
        head.delete_to = watermark.delete_to
        return head

    async def read_whole(self, key: JournalKey, partition: int, until: int) -> Head | None:
        return await self._kafka.read_whole(key, partition, until)

    async def read_at(self, key: JournalKey, partition: int, offsets: list[int]) -> Head:
        return await self._kafka.read_at(key, partition, offsets)

    async def close(self) -> None:
        await self._kafka.close()
