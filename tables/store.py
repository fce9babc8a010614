"""The tables' store: Faust's RocksDB store, which drops a partition's local state when that
state is of a changelog longer than the one Kafka holds now.

The tables are an index of the action log, kept in a data dir that can outlive its Kafka (a
rebuilt cluster, recreated topics; `make clean` keeps the worker's data dir). Faust's recovery
then stops the worker with ConsistencyError (the persisted changelog offset is above the
topic's end), or, for an offset of 0, keeps the old state. So when partitions are assigned,
before recovery reads their persisted offsets (Faust's table manager rebalances the tables
first), each one whose persisted offset is not below its changelog's end offset is emptied,
with a warning, and recovery rebuilds it from the changelog as a new worker's.

**Restored ahead of Faust.** Faust's recovery handles a changelog record at a time through its
event machinery, ~45 us each (BENCHMARKS.md, "A fresh worker's restore": ~20,000 records/s
against ~550,000 for a bare consumer), so a worker with a new data dir took minutes per 10^6
entries before it served, and 32 short partitions (~290 records each) restored at ~450
records/s, most of it Faust's per-partition and per-record overhead. So, in the same rebalance
step, every assigned partition of a table whose changelog holds at least `KJ_RESTORE_AHEAD_MIN`
records (1: any) past its persisted offset is read here first, all of them in one pass of the
worker's kept consumer (`SharedChangelogEnds`), a batch at a time; each partition's part of a
batch is written in one RocksDB write batch and then its last offset persisted, as Faust's own
recovery does, with a turn of the event loop every `_RESTORE_STEP` records (the catch-ups that
serve the partitions handed over go on): a crash leaves a persisted offset at or below what is
written, and whoever restores next starts there (a put or delete written twice is the same
state). Faust's recovery then reads only what came after. Any failure here leaves the rest to
Faust's recovery, which reads from the offset persisted last.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any

import faust
import rocksdict
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.stores import rocksdb

from journal.kafka import end_offsets, start_consumer, stop_consumer
from journal.metrics import METRICS
from kjconfig.access import KafkaAccess
from tables.limits import DEFAULT_RESTORE_AHEAD_MIN

log = logging.getLogger(__name__)

# a topic and its partition count -> each partition's end offset (its next record's)
ChangelogEnds = Callable[[str, int], Awaitable[dict[int, int]]]
# changelog records (key, value or None for a deletion, offset) of one partition
Records = list[tuple[bytes, bytes | None, int]]
# changelog partitions' records, a partition's batch at a time
Changelog = AsyncGenerator[tuple[int, Records], None]

_RESTORE_BATCH = 10_000  # records a batch at most: one RocksDB write batch, memory bounded
# records put in a write between turns of the event loop: a fetched batch is parsed and written
# without an await, and a joining worker restores ~10^6 records ahead at 1,000,000 journals
# while the catch-ups serving the partitions handed to it wait for a turn (BENCHMARKS.md, "A
# rebalance's pause at 1,000,000 journals")
_RESTORE_STEP = 1_000
RESTORED_RECORDS = "kafka_journal_table_restored_ahead_records_total"
RESTORED_SECONDS = "kafka_journal_table_restored_ahead_seconds_total"
_RESTORE_STALL_S = 30.0  # no progress this long: Faust's recovery takes over from there


class SharedChangelogEnds:
    """`ChangelogEnds` of every table of a worker, and their restores read ahead (`read`),
    through one consumer, started at the first ask and kept until `close`: a consumer started
    per ask cost ~100-150 ms (its connection and metadata), four tables one after another in
    every rebalance while the partitions that moved wait for their new owner (BENCHMARKS.md,
    "A rebalance's pause"); a kept one answers in ~1 ms. A failed ask drops the consumer: the
    next one starts afresh."""

    def __init__(self, kafka: KafkaAccess) -> None:
        self._kafka = kafka
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()  # one consumer, started once, asked one at a time
        self._closed = False

    async def __call__(self, topic: str, partitions: int) -> dict[int, int]:
        if self._closed:  # asked while the worker stops: a consumer of its own
            return await end_offsets(self._kafka, topic, partitions)
        async with self._lock:
            consumer = await self._started()
            try:
                ends = await consumer.end_offsets(
                    [TopicPartition(topic, p) for p in range(partitions)]
                )
            except BaseException:
                self._consumer = None
                await stop_consumer(consumer)
                raise
        return {tp.partition: offset for tp, offset in ends.items()}

    async def read(self, topic: str, ranges: Mapping[int, tuple[int, int]]) -> Changelog:
        """`read_ranges` through the kept consumer (one of its own once closed)."""
        if self._closed:
            async for batch in read_with_own_consumer(self._kafka, topic, ranges):
                yield batch
            return
        async with self._lock:
            consumer = await self._started()
            try:
                # closed on the reader's early stop, not later by the garbage collector (it
                # would reassign the kept consumer under another read)
                async with contextlib.aclosing(read_ranges(consumer, topic, ranges)) as batches:
                    async for batch in batches:
                        yield batch
            except BaseException:
                self._consumer = None
                await stop_consumer(consumer)
                raise

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            self._consumer = await start_consumer(self._kafka, **_RESTORE_OPTIONS)
        return self._consumer

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            consumer, self._consumer = self._consumer, None
            if consumer is not None:
                await stop_consumer(consumer)


def changelog_of(app_id: str, table: str) -> str:
    """The changelog topic of the workers' table `table`, as Faust names it (`<app id>-<table
    name>-changelog`)."""
    return f"{app_id}-{table}-changelog"


_RESTORE_OPTIONS: dict[str, Any] = {"max_partition_fetch_bytes": 8 * 1024 * 1024}


async def read_with_own_consumer(
    kafka: KafkaAccess, topic: str, ranges: Mapping[int, tuple[int, int]]
) -> Changelog:
    """`read_ranges` through a consumer started for this read alone."""
    consumer = await start_consumer(kafka, **_RESTORE_OPTIONS)
    try:
        async with contextlib.aclosing(read_ranges(consumer, topic, ranges)) as batches:
            async for batch in batches:
                yield batch
    finally:
        await stop_consumer(consumer)


async def read_ranges(
    consumer: AIOKafkaConsumer, topic: str, ranges: Mapping[int, tuple[int, int]]
) -> Changelog:
    """The records of each partition's [start, end) in `ranges`, a partition's batch at a time,
    all the partitions in one pass of `consumer` (compaction leaves gaps; a start below the
    log's start begins at it). The consumer is left assigned nothing: a kept consumer must not
    go on fetching."""
    tps = {TopicPartition(topic, p): end for p, (start, end) in ranges.items() if start < end}
    consumer.assign(list(tps))
    try:
        for tp in tps:
            consumer.seek(tp, ranges[tp.partition][0])
        left = dict(tps)
        progressed = time.monotonic()
        while left:
            fetched = await consumer.getmany(*left, timeout_ms=500, max_records=_RESTORE_BATCH)
            for tp, got in fetched.items():
                end = tps[tp]
                records = [(r.key, r.value, r.offset) for r in got if r.offset < end]
                if records:
                    progressed = time.monotonic()
                    yield tp.partition, records
            for tp in [tp for tp in left if await consumer.position(tp) >= left[tp]]:
                consumer.pause(tp)  # its end reached: fetch no further
                del left[tp]
            if left and time.monotonic() - progressed > _RESTORE_STALL_S:
                raise TimeoutError(f"{topic}{sorted(left)}: no record in {_RESTORE_STALL_S} s")
    finally:
        consumer.assign([])


@dataclass(frozen=True, slots=True)
class ChangelogRestore:
    """Where a table's changelog partitions are read ahead of Faust's recovery (through the
    worker's kept consumer, `shared`, else a consumer of `kafka` per read), and from how many
    records on (`KJ_RESTORE_AHEAD_MIN`)."""

    kafka: KafkaAccess
    min_records: int = DEFAULT_RESTORE_AHEAD_MIN
    shared: SharedChangelogEnds | None = None

    async def read(self, topic: str, ranges: Mapping[int, tuple[int, int]]) -> Changelog:
        """`read_ranges` of the partitions' [start, end) in `ranges`, in one pass."""
        if self.shared is not None:
            async with contextlib.aclosing(self.shared.read(topic, ranges)) as batches:
                async for batch in batches:
                    yield batch
            return
        async for batch in read_with_own_consumer(self.kafka, topic, ranges):
            yield batch


class RocksMemory:
    """One worker's RocksDB memory and open files, shared by every table partition's database
    it opens (issue 43). Faust opens each with its own 2 GiB block cache and 3 write buffers of
    64 MiB: ~3-6 GB of buffers at 96 databases, growing with the partitions a worker holds.
    Here one LRU block cache of `memory_bytes` serves them all, and their memtables are charged
    to it (a write buffer manager of half of it: past that, the largest memtable is flushed),
    so the worker's table memory stays about `memory_bytes` whatever it holds; its
    `max_open_files` is divided among the `databases` it may open (each table's partitions)."""

    def __init__(self, memory_bytes: int, max_open_files: int, databases: int) -> None:
        self.memory_bytes = memory_bytes
        self.cache = rocksdict.Cache(memory_bytes)
        self.buffers = rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
            memory_bytes // 2, False, self.cache
        )
        # a memtable's size: a fair share of the buffers, within RocksDB's usual range
        share = memory_bytes // 2 // max(databases, 1)
        self.write_buffer_size = min(
            max(share, _MIN_WRITE_BUFFER), rocksdb.DEFAULT_WRITE_BUFFER_SIZE
        )
        self.max_open_files = max(max_open_files // max(databases, 1), _MIN_OPEN_FILES)

    def options(self, options: rocksdb.RocksDBOptions) -> rocksdb.RocksDBOptions:
        """`options` (a Faust store's) on this worker's shared memory."""
        return _SharedOptions(
            self,
            max_open_files=self.max_open_files,
            write_buffer_size=self.write_buffer_size,
            max_write_buffer_number=2,
            use_rocksdict=options.use_rocksdict,
            ttl=options.ttl,
            **options.extra_options,
        )


_MIN_WRITE_BUFFER = 1024**2
_MIN_OPEN_FILES = 16  # RocksDB needs a few per database (its manifest, logs, an SST or two)


class _SharedOptions(rocksdb.RocksDBOptions):  # type: ignore[misc]
    """Faust's RocksDB options (rocksdict's driver), with the worker's cache and buffers."""

    def __init__(self, memory: RocksMemory, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._memory = memory

    def as_options(self) -> Any:
        if not self.use_rocksdict:  # python-rocksdb: Faust's own, per database
            return super().as_options()
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_max_open_files(self.max_open_files)
        options.set_write_buffer_size(self.write_buffer_size)
        options.set_target_file_size_base(self.target_file_size_base)
        options.set_max_write_buffer_number(self.max_write_buffer_number)
        options.set_write_buffer_manager(self._memory.buffers)
        table = rocksdict.BlockBasedOptions()
        table.set_bloom_filter(self.bloom_filter_size, block_based=True)
        table.set_block_cache(self._memory.cache)
        table.set_index_type(rocksdict.BlockBasedIndexType.binary_search())
        options.set_block_based_table_factory(table)
        return options


class IndexStore(rocksdb.Store):  # type: ignore[misc]
    def __init__(
        self,
        *args: Any,
        changelog_ends: ChangelogEnds,
        restore: ChangelogRestore | None = None,
        memory: RocksMemory | None = None,
        open_at_start: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._changelog_ends = changelog_ends
        self._restore = restore  # None: Faust's recovery restores alone
        self._open_at_start = open_at_start
        if memory is not None:  # None: Faust's options, a cache and buffers per database
            # Faust's store sets it in its __init__, untyped
            faust_options = self.rocksdb_options  # type: ignore[has-type]
            self.rocksdb_options = memory.options(faust_options)

    async def on_start(self) -> None:
        """With `open_at_start`, every partition's database opened now, before the worker
        joins its group: opened in the rebalance callback instead (Faust's active partitions,
        then the standbys whose persisted offsets are read), ~50 ms each on a loaded host,
        they were ~6 s of a joining worker's ~7.5 s pause at 32 partitions while the
        partitions handed to it waited (BENCHMARKS.md, "Restore and rebalance at 32
        partitions"). Faust keeps an open database until the partition is revoked."""
        await super().on_start()
        if self._open_at_start:
            for partition in range(self.table.partitions):
                partition_db(self, partition)
                await asyncio.sleep(0)  # the web server's answers (not ready) go on

    async def on_rebalance(
        self,
        assigned: Set[Any],
        revoked: Set[Any],
        newly_assigned: Set[Any],
        generation_id: int = 0,
    ) -> None:
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)
        topic = self.table.changelog_topic.get_topic_name()
        async with self.db_lock:  # every assigned partition, kept ones too, as recovery checks
            tps = {tp for tp in assigned if tp.topic == topic}
            if not tps:
                return
            if self._restore is None and all(self.persisted_offset(tp) is None for tp in tps):
                return  # a new worker's, restored by Faust alone: nothing to ask Kafka
            ends = await self._changelog_ends(topic, self.table.partitions)
            self._discard_stale(tps, topic, ends)
            if self._restore is not None:
                await self._restore_ahead(self._restore, tps, ends)

    def _discard_stale(self, tps: Set[Any], topic: str, ends: dict[int, int]) -> None:
        for tp in sorted(tps):
            offset = self.persisted_offset(tp)
            end = ends[tp.partition]
            if offset is not None and offset >= end:
                log.warning(
                    "discarding the local state of table %s partition %d: its persisted "
                    "changelog offset %d is not below the end of %s (%d), which was emptied "
                    "or recreated; the partition is rebuilt from it",
                    self.table.name,
                    tp.partition,
                    offset,
                    topic,
                    end,
                )
                self._empty(tp.partition)

    async def _restore_ahead(
        self, restore: ChangelogRestore, tps: Set[Any], ends: dict[int, int]
    ) -> None:
        by_partition = {tp.partition: tp for tp in tps}
        ranges: dict[int, tuple[int, int]] = {}
        for partition, tp in sorted(by_partition.items()):
            persisted = self.persisted_offset(tp)
            start = 0 if persisted is None else persisted + 1
            end = ends[partition]
            if end > start and end - start >= restore.min_records:
                ranges[partition] = (start, end)
        if not ranges:
            return
        topic = next(iter(tps)).topic
        restored, started = 0, time.monotonic()
        try:
            # closed here, not by the garbage collector: the kept consumer's lock is held
            async with contextlib.aclosing(restore.read(topic, ranges)) as batches:
                async for partition, batch in batches:
                    if batch:  # a reader need not skip empty fetches
                        await self._write(by_partition[partition], batch)
                        restored += len(batch)
        except Exception as error:  # Faust's recovery reads what is left
            log.warning("restoring %s ahead stopped after %d records: %r", topic, restored, error)
        took = time.monotonic() - started
        table = self.table.name
        METRICS.counter(RESTORED_RECORDS, table=table).inc(restored)
        METRICS.counter(RESTORED_SECONDS, table=table).inc(took)
        log.info(
            "restored %d records of %d partitions of %s ahead of Faust's recovery in %.2f s",
            restored,
            len(ranges),
            topic,
            took,
        )

    async def _write(self, tp: Any, batch: Records) -> None:
        """One batch in one write, then its offset persisted (the order a crash needs), with a
        turn of the event loop every `_RESTORE_STEP` records it puts in the write (and after
        it): the write itself is one call, one per fetched batch."""
        writes = rocksdict.WriteBatch(raw_mode=True)
        for n, (key, value, _) in enumerate(batch, 1):
            if value is None:
                writes.delete(key)
            else:
                writes.put(key, value)
            if n % _RESTORE_STEP == 0:
                await asyncio.sleep(0)  # the loop's other tasks go on
        partition_db(self, tp.partition).write(writes)
        self.set_persisted_offset(tp, batch[-1][2])
        forget_key_partitions(self)  # its keys may now be in this partition
        await asyncio.sleep(0)

    def _empty(self, partition: int) -> None:
        db = partition_db(self, partition)
        for key in list(partition_keys(self, partition)):
            db.delete(key)
        db.delete(self.offset_key)
        forget_key_partitions(self)  # it may name this partition for keys it no longer holds


# Faust's RocksDB store has no public access to one partition's data: these few functions are
# the only users of its private members (faust-streaming 0.15.3), and
# tests/test_private_hooks.py fails if an upgrade changes what they rely on.


def partition_db(store: rocksdb.Store, partition: int) -> Any:
    """The partition's database (a rocksdict `Rdict`), opened if it was not."""
    return store._db_for_partition(partition)


def partition_keys(store: rocksdb.Store, partition: int) -> Iterator[bytes]:
    """The partition's keys, without the store's own persisted-offset key."""
    keys: Iterator[bytes] = store._visible_keys(partition_db(store, partition))
    return keys


def partition_items(store: rocksdb.Store, partition: int) -> Iterator[tuple[bytes, bytes]]:
    """The partition's keys and values, without the store's own persisted-offset key."""
    items: Iterator[tuple[bytes, bytes]] = store._visible_items(partition_db(store, partition))
    return items


def partition_entries(
    table: Any, partition: int, from_key: bytes | None
) -> Iterator[tuple[bytes, bytes]]:
    """A table's entries in one partition, in key order from `from_key` (None: the first),
    without the store's own persisted-offset key (`tables.pruning` sweeps with it)."""
    store = table.data
    items: Iterator[tuple[bytes, bytes]] = partition_db(store, partition).items(from_key=from_key)
    return ((key, value) for key, value in items if key != store.offset_key)


def forget_key_partitions(store: rocksdb.Store) -> None:
    """Empty the store's cache of which partition holds a key (its reads trust it)."""
    store._key_index.clear()


class IndexTable(faust.Table):  # type: ignore[misc]
    """A table on an `IndexStore` (Faust picks a store class by its URL's scheme, from a
    registry of its own: this one is chosen here instead)."""

    def __init__(
        self,
        app: faust.App,
        *,
        changelog_ends: ChangelogEnds,
        restore: ChangelogRestore | None = None,
        memory: RocksMemory | None = None,
        open_at_start: bool = False,
        **kwargs: Any,
    ) -> None:
        self._changelog_ends = changelog_ends
        self._restore = restore
        self._memory = memory
        self._open_at_start = open_at_start
        super().__init__(app, **kwargs)

    def _new_store(self) -> IndexStore:
        # Private, as `self._store` (the store's URL): Faust's registry of stores by scheme
        # cannot pass `changelog_ends`; Faust's `Table.data` builds its store with this method
        # (tests/test_private_hooks.py). The arguments Faust's own `_new_store_by_url` gives.
        return IndexStore(
            self._store or self.app.conf.store,
            self.app,
            self,
            table_name=self.name,
            key_type=self.key_type,
            key_serializer=self.key_serializer,
            value_serializer=self.value_serializer,
            value_type=self.value_type,
            loop=self.loop,
            options=self.options,
            changelog_ends=self._changelog_ends,
            restore=self._restore,
            memory=self._memory,
            open_at_start=self._open_at_start,
        )


def add_index_table(
    app: faust.App,
    kafka: KafkaAccess,
    partitions: int,
    name: str,
    help: str,
    memory: RocksMemory | None = None,
    restore_ahead_min: int = DEFAULT_RESTORE_AHEAD_MIN,
    ends: SharedChangelogEnds | None = None,
) -> Any:
    """A table of bytes keys and values on an `IndexStore` (its changelog's ends asked of, and
    its restore read through, `ends`, the worker's `SharedChangelogEnds`, else a consumer of
    `kafka` per ask and per restore; its RocksDB on the worker's `memory`, every partition's
    database opened when the app starts), added to the app."""
    return app.tables.add(
        IndexTable(
            app,
            changelog_ends=functools.partial(end_offsets, kafka) if ends is None else ends,
            restore=ChangelogRestore(kafka, restore_ahead_min, ends),
            memory=memory,
            open_at_start=True,
            name=name,
            beacon=app.tables.beacon,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            help=help,
        )
    )
