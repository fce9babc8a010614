"""The tables' store: Faust's RocksDB store, which drops a partition's local state when that
state is of a changelog longer than the one Kafka holds now.

The tables are an index of the action log, kept in a data dir that can outlive its Kafka (a
rebuilt cluster, recreated topics; `make clean` keeps the worker's data dir). Faust's recovery
then stops the worker with ConsistencyError (the persisted changelog offset is above the
topic's end), or, for an offset of 0, keeps the old state. So when partitions are assigned,
before recovery reads their persisted offsets (Faust's table manager rebalances the tables
first), each one whose persisted offset is not below its changelog's end offset is emptied,
with a warning, and recovery rebuilds it from the changelog as a new worker's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Set
from typing import Any

import faust
import rocksdict
from faust.stores import rocksdb

log = logging.getLogger(__name__)

# a topic and its partition count -> each partition's end offset (its next record's)
ChangelogEnds = Callable[[str, int], Awaitable[dict[int, int]]]


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
        memory: RocksMemory | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._changelog_ends = changelog_ends
        if memory is not None:  # None: Faust's options, a cache and buffers per database
            # Faust's store sets it in its __init__, untyped
            faust_options = self.rocksdb_options  # type: ignore[has-type]
            self.rocksdb_options = memory.options(faust_options)

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
            await self._discard_stale({tp for tp in assigned if tp.topic == topic}, topic)

    async def _discard_stale(self, tps: Set[Any], topic: str) -> None:
        persisted = {tp.partition: self.persisted_offset(tp) for tp in tps}
        persisted = {p: offset for p, offset in persisted.items() if offset is not None}
        if not persisted:  # a new worker's: nothing to compare (and no Kafka query)
            return
        ends = await self._changelog_ends(topic, self.table.partitions)
        for partition, offset in sorted(persisted.items()):
            end = ends[partition]
            if offset >= end:
                log.warning(
                    "discarding the local state of table %s partition %d: its persisted "
                    "changelog offset %d is not below the end of %s (%d), which was emptied "
                    "or recreated; the partition is rebuilt from it",
                    self.table.name,
                    partition,
                    offset,
                    topic,
                    end,
                )
                self._empty(partition)

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
        memory: RocksMemory | None = None,
        **kwargs: Any,
    ) -> None:
        self._changelog_ends = changelog_ends
        self._memory = memory
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
            memory=self._memory,
        )
