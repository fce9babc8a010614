"""The pipeline's jobs against the real servers, on Spark local[2].

One workload (seeded, a few hundred records over two dozen journals, plus three malformed
records) is replicated once by the core's routine into keyspace A and once by the Spark
rebuild into keyspace B; the tests compare, audit and export them.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from app.cli import build_parser
from journal.model import Event
from journal.settings import Settings
from journal.store import cql
from journal.store.cassandra import CassandraStore
from pipeline.audit import audit
from pipeline.cli import execute
from pipeline.export import event_record_of, export
from pipeline.rebuild import RebuildResult, rebuild
from stack import Stack
from tests.pipeline.workload import Workload, write_malformed, write_workload
from tests.support.compressed import CODECS, produce_reference
from tests.support.harness import Harness, harness, unique

pytestmark = pytest.mark.integration

# Every column of the three tables, with the write time of one cell of each row.
TABLES = {
    "events": (
        "topic, id, segment, seq_nr, partition, offset, timestamp, tags, payload_type, "
        "payload_txt, payload_bin, expire_after, metadata, headers, writetime(offset)",
        4,
    ),
    "journals": (
        "topic, id, partition, offset, seq_nr, delete_to, segment_size, writetime(offset)",
        2,
    ),
    "pointers": ("topic, partition, offset, writetime(offset)", 2),
}


@dataclass
class Replicated:
    harness: Harness
    work: Workload
    malformed: int
    rebuilt: Settings  # keyspace B
    result: RebuildResult
    progress: list[str]

    @property
    def store(self) -> CassandraStore:
        store = self.harness.journals.replicated_store
        assert isinstance(store, CassandraStore)
        return store


@pytest.fixture(scope="module")
async def replicated(stack: Stack, spark: SparkSession) -> AsyncIterator[Replicated]:
    async with harness(stack, unique("pipe_a"), "pipe") as h:
        work = await write_workload(h.journals, seed=4)
        malformed = await write_malformed(h.producer, h.settings.topic)
        await h.replicate()
        rebuilt = replace(h.settings, keyspace=unique("pipe_b"))
        progress: list[str] = []
        result = await rebuild(spark, rebuilt, "earliest", progress=progress.append)
        yield Replicated(h, work, malformed, rebuilt, result, progress)


async def rows(store: CassandraStore, keyspace: str, table: str) -> dict[tuple[Any, ...], Any]:
    columns, key_size = TABLES[table]
    query = f"SELECT {columns} FROM {keyspace}.{table}"
    return {tuple(row[:key_size]): tuple(row) async for row in cql.stream(store.session, query)}


async def test_rebuild_writes_the_rows_the_core_replication_writes(
    replicated: Replicated, spark: SparkSession
) -> None:
    work, store = replicated.work, replicated.store
    assert work.deletes > 5 and work.purges > 3 and work.events > 600  # a workload worth it
    for table in TABLES:
        a = await rows(store, replicated.harness.settings.keyspace, table)
        b = await rows(store, replicated.rebuilt.keyspace, table)
        assert a, table
        assert a == b, table
    # From the pointers, a second rebuild finds nothing left to do.
    again = await rebuild(spark, replicated.rebuilt, "pointers", progress=lambda line: None)
    assert again.counts.records == 0
    assert again.pointers == replicated.result.pointers


async def test_rebuild_counts_and_reports_malformed_records(replicated: Replicated) -> None:
    result = replicated.result
    assert result.counts.malformed == replicated.malformed == 3
    samples = "\n".join(result.counts.malformed_samples)
    assert "no journal.action header" in samples
    assert "bad journal.action header" in samples
    assert "bad events" in samples
    assert any("3 malformed" in line for line in replicated.progress)
    assert sum(line.startswith("malformed: ") for line in replicated.progress) == 3
    # ...and the journals around them are replicated all the same, pointers at the end.
    assert result.pointers == await replicated.store.pointers(replicated.rebuilt.topic)
    assert result.counts.events > 0


def cli_args(job: str, settings: Settings, *extra: str) -> argparse.Namespace:
    return build_parser().parse_args(
        [
            *("pipeline", job, "--topic", settings.topic, "--keyspace", settings.keyspace),
            *("--bootstrap", settings.kafka_bootstrap),
            *("--cassandra-hosts", settings.cassandra_hosts),
            *("--cassandra-port", str(settings.cassandra_port), *extra),
        ]
    )


async def test_audit_passes_then_finds_a_removed_and_a_changed_event(
    replicated: Replicated, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    own = replace(replicated.rebuilt, keyspace=unique("pipe_c"))  # an own copy to damage
    await rebuild(spark, own, progress=lambda line: None)
    settings = replace(own, segment_size=replicated.harness.settings.segment_size)

    assert await execute(cli_args("audit", settings), spark, settings) == 0
    report = capsys.readouterr().out
    assert report.startswith("audit: OK:") and "3 malformed" in report

    store, ks = replicated.store, own.keyspace
    journals = await rows(store, ks, "journals")
    visible = [
        row
        for row in (await rows(store, ks, "events")).values()
        if row[8] in ("json", "text") and row[3] > (journals[row[:2]][5] or 0)
    ]
    removed, changed = visible[0], visible[-1]
    assert removed[:2] != changed[:2]
    await cql.execute(
        store.session,
        f"DELETE FROM {ks}.events WHERE topic = %s AND id = %s AND segment = %s AND seq_nr = %s",
        removed[:4],
    )
    await cql.execute(
        store.session,
        f"UPDATE {ks}.events SET payload_txt = %s "
        "WHERE topic = %s AND id = %s AND segment = %s AND seq_nr = %s",
        ('"changed"', *changed[:4]),
    )

    result = await audit(spark, settings, progress=lambda line: None)
    assert not result.ok
    found = {(d.journal, d.kind) for d in result.differences}
    assert found == {
        (f"{removed[0]}:{removed[1]}", "missing_event"),
        (f"{changed[0]}:{changed[1]}", "different_event"),
    }
    assert await execute(cli_args("audit", settings), spark, settings) == 1
    report = capsys.readouterr().out
    assert "2 DIFFERENCES" in report and f"seqNr {removed[3]} " in report
    assert "missing_event" in report and "different_event" in report


async def test_export_holds_what_the_journal_api_reads(
    replicated: Replicated, spark: SparkSession, tmp_path: Path
) -> None:
    settings = replicated.harness.settings
    out = tmp_path / "export"
    exported = await export(spark, settings, str(out), progress=lambda line: None)
    assert exported.rows > 0
    assert (out / f"topic={settings.topic}").is_dir()
    assert list((out / f"topic={settings.topic}").glob("date=20*"))

    by_journal: dict[str, list[Any]] = {}
    for row in spark.read.parquet(str(out)).collect():
        by_journal.setdefault(row["id"], []).append(event_record_of(row))
    read = {}
    for journal_id in replicated.work.journal_ids:
        journal = replicated.harness.journals.journal(journal_id)
        read[journal_id] = [record async for record in journal.read()]
    assert {i: sorted(r, key=lambda e: e.seq_nr) for i, r in by_journal.items()} == {
        i: records for i, records in read.items() if records
    }
    assert exported.rows == sum(len(records) for records in read.values())


async def test_rebuild_reads_batches_of_every_codec(
    stack: Stack, spark: SparkSession, vectors: Path
) -> None:
    """Spark's Kafka source (the JVM's codecs) on kafka-journal's records, one batch per codec
    and partition: the same rows as the core's replication."""
    async with harness(stack, unique("pipe_codecs_a"), "pipe_codecs") as h:
        expected: dict[str, list[Event]] = {}
        for codec in CODECS:
            expected |= await produce_reference(h.settings, vectors, codec, f"-{codec}")
        await h.replicate()
        rebuilt = replace(h.settings, keyspace=unique("pipe_codecs_b"))
        result = await rebuild(spark, rebuilt, "earliest", progress=lambda line: None)
        assert result.counts.malformed == 0
        assert result.counts.events == sum(len(events) for events in expected.values())
        store = h.journals.replicated_store
        assert isinstance(store, CassandraStore)
        replicated = await rows(store, h.settings.keyspace, "events")
        assert len(replicated) == result.counts.events
        assert await rows(store, rebuilt.keyspace, "events") == replicated
