"""`IndexStore` on a real RocksDB: a partition whose persisted changelog offset is not below
its changelog's end is emptied on assignment, the others are kept; a long restore is read
ahead of Faust's recovery, a batch per write, its offset persisted after each."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.types import TP

from tables.store import Changelog, ChangelogRestore, IndexStore, IndexTable

PARTITIONS = 3


class Ends:
    """The changelog's end offsets, as Kafka would give them; the questions asked."""

    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = ends
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, topic: str, partitions: int) -> dict[int, int]:
        self.asked.append((topic, partitions))
        return self.ends


class Changelogs(ChangelogRestore):
    """Changelog batches as Kafka would hand them (key, value or None, offset), failing after
    `fail_after` batches if set; the reads asked."""

    def __init__(self, batches: list[list[tuple[bytes, bytes | None, int]]], min_records: int):
        super().__init__(kafka=None, min_records=min_records)  # type: ignore[arg-type]
        object.__setattr__(self, "batches", batches)
        object.__setattr__(self, "asked", [])
        object.__setattr__(self, "fail_after", None)

    async def read(self, topic: str, ranges: Mapping[int, tuple[int, int]]) -> Changelog:
        self.asked.append(dict(ranges))  # type: ignore[attr-defined]
        for n, batch in enumerate(self.batches):  # type: ignore[attr-defined]
            if n == self.fail_after:  # type: ignore[attr-defined]
                raise ConnectionError("the broker went away")
            for partition, (start, end) in sorted(ranges.items()):
                yield partition, [r for r in batch if start <= r[2] < end]


def _table(tmp_path: Path, ends: Ends, restore: ChangelogRestore | None = None) -> Any:
    app = faust.App("stale-test", datadir=str(tmp_path), store="rocksdb://")
    return app.tables.add(
        IndexTable(
            app,
            changelog_ends=ends,
            restore=restore,
            name="offsets",
            beacon=app.tables.beacon,
            key_type=bytes,
            value_type=bytes,
            partitions=PARTITIONS,
        )
    )


def _tp(table: Any, partition: int) -> TP:
    return TP(table.changelog_topic.get_topic_name(), partition)


def _write(store: IndexStore, tp: TP, key: bytes, persisted: int) -> None:
    store._db_for_partition(tp.partition).put(key, b"runs")
    store.set_persisted_offset(tp, persisted)


def _held(store: IndexStore, tp: TP) -> list[bytes]:
    return list(store._visible_keys(store._db_for_partition(tp.partition)))


async def _assign(store: IndexStore, tps: set[TP]) -> None:
    await store.on_rebalance(tps, set(), tps, 0)


async def test_partitions_past_their_changelogs_end_are_emptied_and_the_rest_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ends = Ends({0: 0, 1: 0, 2: 8})
    table = _table(tmp_path, ends)
    store = table.data
    tp0, tp1, tp2 = (_tp(table, p) for p in range(PARTITIONS))
    _write(store, tp0, b"a", persisted=5)
    _write(store, tp1, b"b", persisted=0)  # Faust's own check lets an offset of 0 pass
    _write(store, tp2, b"c", persisted=7)  # the changelog's last record: in step
    caplog.set_level(logging.WARNING, logger="tables.store")

    await _assign(store, {tp0, tp1, tp2})

    assert ends.asked == [(tp0.topic, PARTITIONS)]
    assert (_held(store, tp0), store.persisted_offset(tp0)) == ([], None)
    assert (_held(store, tp1), store.persisted_offset(tp1)) == ([], None)
    assert (_held(store, tp2), store.persisted_offset(tp2)) == ([b"c"], 7)
    assert [r.getMessage() for r in caplog.records] == [
        f"discarding the local state of table offsets partition {p}: its persisted changelog "
        f"offset {offset} is not below the end of {tp0.topic} (0), which was emptied or "
        "recreated; the partition is rebuilt from it"
        for p, offset in ((0, 5), (1, 0))
    ]


async def test_a_store_with_nothing_persisted_asks_kafka_nothing(tmp_path: Path) -> None:
    ends = Ends({})
    table = _table(tmp_path, ends)
    await _assign(table.data, {_tp(table, p) for p in range(PARTITIONS)})
    assert ends.asked == []


async def test_only_the_tables_own_changelog_partitions_are_looked_at(tmp_path: Path) -> None:
    ends = Ends({0: 0})
    table = _table(tmp_path, ends)
    store = table.data
    _write(store, _tp(table, 0), b"a", persisted=3)
    await _assign(store, {TP("another-changelog", 0), TP("actions", 0)})
    assert ends.asked == []
    assert _held(store, _tp(table, 0)) == [b"a"]


BATCHES: list[list[tuple[bytes, bytes | None, int]]] = [
    [(b"a", b"runs-a", 0), (b"b", b"runs-b", 1)],
    [(b"a", None, 2), (b"c", b"runs-c", 3)],  # a's entry pruned: a tombstone
]


async def test_a_long_restore_is_read_ahead_and_its_offset_persisted(tmp_path: Path) -> None:
    changelogs = Changelogs(BATCHES, min_records=3)
    table = _table(tmp_path, Ends({0: 4, 1: 2, 2: 0}), changelogs)
    store = table.data
    tp0, tp1, tp2 = (_tp(table, p) for p in range(PARTITIONS))

    await _assign(store, {tp0, tp1, tp2})

    # partition 0 has 4 records to restore: read ahead; 1 has 2 (< 3) and 2 none: Faust's
    assert changelogs.asked == [{0: (0, 4)}]  # type: ignore[attr-defined]
    assert (sorted(_held(store, tp0)), store.persisted_offset(tp0)) == ([b"b", b"c"], 3)
    assert (_held(store, tp1), store.persisted_offset(tp1)) == ([], None)


async def test_a_restore_that_fails_leaves_its_written_batches_persisted(tmp_path: Path) -> None:
    changelogs = Changelogs(BATCHES, min_records=1)
    object.__setattr__(changelogs, "fail_after", 1)
    table = _table(tmp_path, Ends({0: 4}), changelogs)
    store = table.data
    tp0 = _tp(table, 0)

    await _assign(store, {tp0})  # no raise: Faust's recovery goes on from offset 2

    assert (sorted(_held(store, tp0)), store.persisted_offset(tp0)) == ([b"a", b"b"], 1)


async def test_a_restore_starts_after_the_persisted_offset(tmp_path: Path) -> None:
    changelogs = Changelogs(BATCHES, min_records=1)
    table = _table(tmp_path, Ends({0: 4}), changelogs)
    store = table.data
    tp0 = _tp(table, 0)
    _write(store, tp0, b"a", persisted=1)  # a worker's data dir, restored up to offset 1

    await _assign(store, {tp0})

    assert changelogs.asked == [{0: (2, 4)}]  # type: ignore[attr-defined]
    assert (sorted(_held(store, tp0)), store.persisted_offset(tp0)) == ([b"c"], 3)


async def test_short_changelogs_are_read_ahead_in_one_pass(tmp_path: Path) -> None:
    changelogs = Changelogs(BATCHES, min_records=1)
    table = _table(tmp_path, Ends({0: 4, 1: 2, 2: 0}), changelogs)
    store = table.data
    tp0, tp1, tp2 = (_tp(table, p) for p in range(PARTITIONS))
    _write(store, tp1, b"x", persisted=0)

    await _assign(store, {tp0, tp1, tp2})

    # every partition with a record to restore, in one read; 2 has none
    assert changelogs.asked == [{0: (0, 4), 1: (1, 2)}]  # type: ignore[attr-defined]
    assert (sorted(_held(store, tp0)), store.persisted_offset(tp0)) == ([b"b", b"c"], 3)
    assert (sorted(_held(store, tp1)), store.persisted_offset(tp1)) == ([b"b", b"x"], 1)
    assert (_held(store, tp2), store.persisted_offset(tp2)) == ([], None)
