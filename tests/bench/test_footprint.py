"""The footprint counts one copy of what it names, from the files the servers keep: a topic's
log segments, a keyspace's SSTables, and nothing of another topic, keyspace or fixed table."""

from __future__ import annotations

from pathlib import Path

from bench.footprint import cassandra_tables, kafka_bytes


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_kafka_bytes_are_one_copy_of_the_topics_segments(tmp_path: Path) -> None:
    for broker, size in (("b1", 100), ("b2", 300)):  # two replicas: their mean is one copy
        _file(tmp_path / broker / "data" / "topic_a-0" / "00000000000000000000.log", size)
        _file(tmp_path / broker / "data" / "topic_a-0" / "00000000000000000000.index", 999)
        _file(tmp_path / broker / "data" / "topic_ab-0" / "00000000000000000000.log", 999)
    assert kafka_bytes(tmp_path, "topic_a") == 200


def test_cassandra_tables_are_one_copy_per_table_without_fixed_ones(tmp_path: Path) -> None:
    for node in ("n1", "n2"):
        keyspace = tmp_path / node / "data" / "data" / "ks"
        _file(keyspace / "events-0a1b" / "nb-1-big-Data.db", 1000)
        _file(keyspace / "events-0a1b" / "nb-1-big-Index.db", 200)
        _file(keyspace / "events-0a1b" / "nb-txn.log", 999)  # not an SSTable component
        _file(keyspace / "journals-0c2d" / "nb-1-big-Data.db", 50)
        _file(keyspace / "pointers2-0e3f" / "nb-1-big-Data.db", 70)  # a topic's, not a unit's
        _file(tmp_path / node / "data" / "data" / "other" / "events-9f" / "nb-Data.db", 999)
    assert cassandra_tables(tmp_path, "ks") == {"events": 1200, "journals": 50}
