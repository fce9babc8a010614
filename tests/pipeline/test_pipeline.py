"""The pipeline's jobs against the real servers, on Spark local[2].

One workload (seeded, a few hundred records over two dozen journals, racing and retrying
writers among them, plus three malformed records) is replicated once by the core's routine
into keyspace A and once by the Spark rebuild into keyspace B; the tests compare, audit and
export them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from msgspec.structs import replace
from pyspark.sql import SparkSession

from journal.codec import encode_events
from journal.core.model import Ack, Event, Events, JsonPayload, TextPayload
from journal.kafka.topic import end_offsets
from journal.settings import Settings
from journal.store import cql
from journal.store.cassandra import CassandraStore
from pipeline.audit import audit
from pipeline.cli import Audit, execute
from pipeline.export import event_record_of, export
from pipeline.rebuild import RebuildResult, rebuild
from stack import Stack
from tests.pipeline.rows import (
    FIRST,
    ID,
    LAST,
    OFFSET,
    PAYLOAD_TYPE,
    TABLES,
    events_of_row,
    rows,
    with_payload,
)
from tests.pipeline.workload import Workload, write_malformed, write_workload
from tests.support.actions import event
from tests.support.compressed import CODECS, produce_reference
from tests.support.harness import Harness, harness, unique
from tests.support.raw_store import session_of

pytestmark = pytest.mark.integration


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
        return self.harness.store


@pytest.fixture(scope="module")
async def replicated(stack: Stack, spark: SparkSession) -> AsyncIterator[Replicated]:
    async with harness(stack, unique("pipe_a"), "pipe") as h:
        work = await write_workload(h.journals, seed=4)
        malformed = await write_malformed(h.producer, h.settings.topic)
        await h.replicate()
        rebuilt = h.settings.replace(keyspace=unique("pipe_b"))
        progress: list[str] = []
        result = await rebuild(spark, rebuilt, "earliest", progress=progress.append)
        yield Replicated(h, work, malformed, rebuilt, result, progress)


async def test_rebuild_writes_the_rows_the_core_replication_writes(
    replicated: Replicated, spark: SparkSession
) -> None:
    work, store = replicated.work, replicated.store
    assert work.deletes > 5 and work.purges > 3 and work.events > 500  # a workload worth it
    assert work.rivals > 5 and work.retries > 5  # and Appends the conflict rule rejects
    for table in TABLES:
        a = await rows(store, replicated.harness.settings.keyspace, table)
        b = await rows(store, replicated.rebuilt.keyspace, table)
        assert a, table
        assert a == b, table
    # Both stored the race's first writer, not its last: rows of the winning Append alone.
    race = work.race
    assert race is not None
    for keyspace in (replicated.harness.settings.keyspace, replicated.rebuilt.keyspace):
        records = await rows(store, keyspace, "event_records")
        (stored,) = [row for row in records.values() if row[ID] == "race"]
        assert (stored[FIRST], stored[LAST], stored[OFFSET]) == (1, 3, race.winner.offset)
        payloads = [e.payload for e in events_of_row(stored)]
        assert payloads == [TextPayload(f"winner {n}") for n in (1, 2, 3)], keyspace
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


async def test_audit_passes_then_finds_removed_changed_and_rejected_events(
    replicated: Replicated, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    own = replicated.rebuilt.replace(keyspace=unique("pipe_c"))  # an own copy to damage
    await rebuild(spark, own, progress=lambda line: None)
    settings = own.replace(segment_size=replicated.harness.settings.segment_size)

    assert await execute(Audit(), spark, settings) == 0
    report = capsys.readouterr().out
    assert report.startswith("audit: OK:") and "3 malformed" in report
    assert "0 journals checked partially" in report  # Kafka holds every journal whole

    store, ks = replicated.store, own.keyspace
    journals = await rows(store, ks, "journals")
    records = await rows(store, ks, "event_records")
    # rows (Appends) wholly above their journal's deleteTo, of JSON payloads
    visible = [
        row
        for row in records.values()
        if row[PAYLOAD_TYPE] == "json"
        and row[FIRST] > (journals[row[:2]][5] or 0)
        and row[ID] != "race"
    ]
    removed, changed = visible[0], visible[-1]
    assert removed[:2] != changed[:2]
    where = "WHERE topic = %s AND id = %s AND segment = %s AND last_seq_nr = %s"
    await cql.execute(session_of(store), f"DELETE FROM {ks}.event_records {where}", removed[:4])
    await cql.execute(
        session_of(store),
        f"UPDATE {ks}.event_records SET events = %s {where}",
        (with_payload(changed, changed[FIRST], JsonPayload.of("changed")), *changed[:4]),
    )
    # Without the conflict rule, the race's rival would be stored too: its row (1-2) beside
    # the winner's (1-3), which the reads' order leaves behind it
    race = replicated.work.race
    assert race is not None
    (won,) = [row for row in records.values() if row[ID] == race.journal_id]
    rival = tuple(replace(e, payload=TextPayload(race.rival_payload)) for e in events_of_row(won))
    payload_type, value = encode_events(Events(rival[:2]))
    await cql.execute(
        session_of(store),
        f"INSERT INTO {ks}.event_records (topic, id, segment, last_seq_nr, seq_nr, partition, "
        "offset, timestamp, payload_type, events) "
        "VALUES (%s, %s, 0, 2, 1, %s, %s, toTimestamp(now()), %s, %s)",
        (*won[:2], race.rival.partition, race.rival.offset, payload_type.value, value),
    )

    result = await audit(spark, settings, progress=lambda line: None)
    assert not result.ok
    found = {(d.journal, d.kind) for d in result.differences}
    assert found == {
        (f"{removed[0]}:{removed[1]}", "missing_event"),
        (f"{changed[0]}:{changed[1]}", "different_event"),
        (f"{own.topic}:{race.journal_id}", "rejected_event_stored"),
    }
    # each event of the removed Append missing, one changed, the rival's two stored
    differences = result.counts.differences
    assert differences == removed[LAST] - removed[FIRST] + 1 + 1 + 2
    assert await execute(Audit(), spark, settings) == 1
    report = capsys.readouterr().out
    assert f"{differences} DIFFERENCES" in report and f"seqNr {removed[FIRST]} " in report
    assert "missing_event" in report and "rejected_event_stored" in report


async def test_after_retention_the_audit_is_exact_from_a_purge_and_partial_before_it(
    stack: Stack, spark: SparkSession
) -> None:
    """Kafka loses the journals' starts (records deleted as retention would, after they were
    replicated): one journal is purged after the cut, so its audit is exact again; the other
    is not, so its audit takes the store's state as the base (see `pipeline.audit_check`).
    """

    def events(first: int, last: int) -> list[Event]:
        return [event(n) for n in range(first, last + 1)]

    async with harness(stack, unique("pipe_r"), "pipe_r") as h:
        settings, kept, partial = (
            h.settings,
            h.journals.journal("kept"),
            h.journals.journal("partial"),
        )
        await kept.append(events(1, 5))
        await partial.append(events(1, 5))
        cut = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
        await kept.purge()
        again = events(1, 2)
        await kept.append(again)
        await kept.append(again, ack=Ack.KAFKA)  # a retry
        deleted = await partial.delete(2)
        assert deleted.position is not None
        await partial.append(events(6, 7))
        await partial.append(events(3, 4), ack=Ack.KAFKA)  # a rival from a stale view
        await h.replicate()
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
        await admin.start()
        try:
            await admin.delete_records(
                {TopicPartition(settings.topic, p): RecordsToDelete(end) for p, end in cut.items()}
            )
        finally:
            await admin.close()

        result = await audit(spark, settings, progress=lambda line: None)
        assert result.ok, result.lines()
        assert (result.counts.journals, result.counts.journals_partial) == (2, 1)
        assert result.counts.events_checked == 2  # the kept journal's, after its purge

        store, ks = h.journals.store, settings.keyspace
        assert isinstance(store, CassandraStore)
        where = "WHERE topic = %s AND id = %s AND segment = 0 AND last_seq_nr = %s"
        kept_rows = await rows(store, ks, "event_records")
        (kept_row,) = [row for row in kept_rows.values() if row[ID] == "kept"]
        await cql.execute(
            session_of(store),
            f"UPDATE {ks}.event_records SET events = %s {where}",
            (with_payload(kept_row, 2, JsonPayload.of("changed")), settings.topic, "kept", 2),
        )
        # A row as if the Append 6-7 was missed, and an event the Delete removed back, of
        # another Append than 1-5 (whose events at or below deleteTo are kept, hidden, in its
        # row): at the Delete's offset, which no Append has.
        await cql.execute(
            session_of(store),
            f"UPDATE {ks}.journals SET seq_nr = 5, offset = %s WHERE topic = %s AND id = %s",
            (deleted.position.offset, settings.topic, "partial"),
        )
        payload_type, value = encode_events(Events((event(1),)))
        await cql.execute(
            session_of(store),
            f"INSERT INTO {ks}.event_records (topic, id, segment, last_seq_nr, seq_nr, "
            "partition, offset, timestamp, payload_type, events) "
            "VALUES (%s, %s, 0, 1, 1, 0, %s, toTimestamp(now()), %s, %s)",
            (settings.topic, "partial", deleted.position.offset, payload_type.value, value),
        )
        result = await audit(spark, settings, progress=lambda line: None)
        found = {(d.journal.split(":")[1], d.kind) for d in result.differences}
        assert found == {
            ("kept", "different_event"),
            ("partial", "journal_differs"),
            ("partial", "deleted_event_stored"),
        }


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
        rebuilt = h.settings.replace(keyspace=unique("pipe_codecs_b"))
        result = await rebuild(spark, rebuilt, "earliest", progress=lambda line: None)
        assert result.counts.malformed == 0
        assert result.counts.events == sum(len(events) for events in expected.values())
        store = h.store
        replicated = await rows(store, h.settings.keyspace, "event_records")
        assert sum(row[LAST] - row[FIRST] + 1 for row in replicated.values()) == (
            result.counts.events
        )
        assert await rows(store, rebuilt.keyspace, "event_records") == replicated
