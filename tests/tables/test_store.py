"""`IndexStore` on a real RocksDB: a partition whose persisted changelog offset is not below
its changelog's end is emptied on assignment, the others are kept."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.types import TP

from tables.store import IndexStore, IndexTable

PARTITIONS = 3


class Ends:
    """The changelog's end offsets, as Kafka would give them; the questions asked."""

    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = ends
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, topic: str, partitions: int) -> dict[int, int]:
        self.asked.append((topic, partitions))
        return self.ends


def _table(tmp_path: Path, ends: Ends) -> Any:
    app = faust.App("stale-test", datadir=str(tmp_path), store="rocksdb://")
    return app.tables.add(
        IndexTable(
            app,
            changelog_ends=ends,
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
