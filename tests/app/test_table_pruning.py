"""The offset tables hold what Kafka holds (issue 43): once a partition's log start moved past
a journal's records (retention; here `delete_records`, as retention would) and they are
replicated, the worker deletes the journal's entry, a bounded step at a time, so the table's
key count falls, on disk and in the changelog; a worker restored from the changelog holds only
what is left, and reads stay right.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import rocksdict
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from journal.kafka import end_offsets, partition_of
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import Harness, unique
from tests.support.workers import WorkerProcess, metric, wait_replicated

pytestmark = pytest.mark.integration

OLD = 20  # journals whose records will leave Kafka
PRUNED = 'kafka_journal_table_keys_pruned_total{table="append-offsets"}'
# the smallest steps that show the bound: several steps per partition's sweep
ENV = {"KJ_PRUNE_KEYS_PER_STEP": "3", "KJ_PRUNE_INTERVAL_S": "0.2"}


def _table_keys(worker: WorkerProcess) -> int:
    """The append-offsets entries on the stopped worker's disk, every partition's database."""
    return len(_table_entries(worker))


def _table_entries(worker: WorkerProcess) -> dict[bytes, bytes]:
    """The append-offsets entries (key: value) on the stopped worker's disk."""
    dbs = [p for p in Path(worker.datadir).rglob("*append-offsets-*.db") if p.is_dir()]
    assert dbs, f"no table databases under {worker.datadir}"
    entries: dict[bytes, bytes] = {}
    for path in dbs:
        db = rocksdict.Rdict(str(path), access_type=rocksdict.AccessType.read_only())
        try:
            items: Any = db.items()  # rocksdict's stubs type its iterator oddly
            entries.update((k, v) for k, v in items if not k.startswith(b"__faust"))
        finally:
            db.close()
    return entries


async def _changelog_keys(harness: Harness, app_id: str) -> int:
    """Keys whose last value in the append-offsets changelog is not a tombstone: what a
    restore keeps."""
    kafka = harness.settings.kafka_access()
    topic = f"{app_id}-append-offsets-changelog"
    ends = await end_offsets(kafka, topic, harness.settings.partitions)
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None, enable_auto_commit=False)
    await consumer.start()
    live: dict[bytes, bool] = {}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        for tp in tps:
            while await consumer.position(tp) < ends[tp.partition]:
                batch = await consumer.getmany(tp, timeout_ms=1000)
                for record in batch.get(tp, []):
                    assert record.key is not None
                    live[record.key] = record.value is not None
    finally:
        await consumer.stop()
    return sum(live.values())


async def test_entries_whose_records_left_kafka_are_deleted_and_a_restore_keeps_the_rest(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings, client = connected.settings, connected.journals
    app_id = unique("app")
    worker = WorkerProcess(settings, app_id, tmp_path_factory.mktemp("w") / "data", env=ENV)
    worker.start()
    try:
        await worker.wait_ready()
        old = [unique("old") for _ in range(OLD)]
        for journal_id in old:
            await client.journal(journal_id).append(events(1, 2))
        await wait_replicated(settings, connected.store)
        # retention, brought forward: every record so far leaves Kafka
        ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
        await admin.start()
        try:
            await admin.delete_records(
                {TopicPartition(settings.topic, p): RecordsToDelete(e) for p, e in ends.items()}
            )
        finally:
            await admin.close()

        # one live journal per partition: its records drive the agent's steps
        ticks: dict[int, str] = {}
        while len(ticks) < settings.partitions:
            candidate = unique("tick")
            ticks.setdefault(partition_of(candidate, settings.partitions), candidate)
        seq_nr = 0

        async def pruned() -> bool:
            nonlocal seq_nr
            seq_nr += 1
            await asyncio.gather(
                *(client.journal(j).append(events(seq_nr, seq_nr)) for j in ticks.values())
            )
            return await metric(worker, PRUNED) == OLD

        await eventually(pruned, f"the {OLD} old journals' entries deleted")
        await wait_replicated(settings, connected.store)
        assert await _changelog_keys(connected, app_id) == len(ticks)
        # reads stay right: the old journals come from the store
        for journal_id in old[:3]:
            assert [r.seq_nr async for r in client.journal(journal_id).read()] == [1, 2]
    finally:
        worker.stop()
    assert _table_keys(worker) == len(ticks)

    # a worker restored from the changelog holds only what is left, tombstones too, the same
    # entries whether Faust's recovery restores it (its records below KJ_RESTORE_AHEAD_MIN)
    # or, by default, the worker reads it ahead (`tables.store`)
    held = []
    for ahead_from, ahead in ((20_000, False), (None, True)):
        env = ENV if ahead_from is None else {**ENV, "KJ_RESTORE_AHEAD_MIN": str(ahead_from)}
        restored = WorkerProcess(settings, app_id, tmp_path_factory.mktemp("r") / "data", env=env)
        restored.start()
        try:
            await restored.wait_ready()
        finally:
            restored.stop()
        assert ("ahead of Faust's recovery" in restored.log.read_text()) is ahead
        held.append(_table_entries(restored))
        assert len(held[-1]) == len(ticks)
    assert held[0] == held[1]
