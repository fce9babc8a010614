"""A worker whose data dir outlives its Kafka (issue 28): the tables' local state (RocksDB) was
written against changelog topics that are now empty, as after `make clean` (a new Kafka and
Cassandra) and `make run` with the old data dir. The worker discards that state, says so, and
serves exactly what the new log holds.

The rebuilt Kafka is made without touching the dev stack's servers: the app's changelog topics
and its action topic are deleted and created again (empty); the rebuilt Cassandra is a fresh
keyspace.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from journal.kafka.topic import end_offsets, ensure_topic
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from stack import Stack
from tables.tables import APPENDS_TABLE, DELETIONS_TABLE
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique
from tests.support.http_api import HttpJournals, client_session
from tests.support.workers import WorkerProcess, wait_replicated

pytestmark = pytest.mark.integration


def _changelog(app_id: str, table: str) -> str:
    return f"{app_id}-{table}-changelog"  # Faust's name for a table's changelog topic


async def _append_until_a_changelog_partition_has_two_records(
    api: HttpJournals, settings: Settings, app_id: str
) -> list[str]:
    """Journals appended to until some partition's local state holds a changelog offset above 0
    (Faust's own check misses an offset of 0); the journals' ids."""
    journal_ids: list[str] = []

    async def appended() -> bool:
        journal_ids.append(f"old-{len(journal_ids)}")
        await api.append(journal_ids[-1], events(1, 3))
        changelog = _changelog(app_id, APPENDS_TABLE)
        ends = await end_offsets(settings.kafka_access(), changelog, settings.partitions)
        return max(ends.values()) >= 2

    # the agent writes its tables once a second at most (tables/tables.py)
    await eventually(appended, "two records in a partition of the appends' changelog")
    return journal_ids


async def _rebuild_kafka(settings: Settings, app_id: str) -> None:
    """The app's topics as a rebuilt Kafka has them: the action topic and the changelogs empty
    (Faust creates the changelogs again when the worker starts)."""
    doomed = [settings.topic, *(_changelog(app_id, t) for t in (APPENDS_TABLE, DELETIONS_TABLE))]
    admin = AIOKafkaAdminClient(**settings.kafka_access().client_options())
    await admin.start()
    try:
        await admin.delete_topics(doomed)

        async def gone() -> bool:
            return not set(doomed) & set(await admin.list_topics())

        await eventually(gone, f"{doomed} deleted")
    finally:
        await admin.close()
    spec = settings.topic_spec()
    assert await ensure_topic(settings.kafka_access(), spec) == spec.partitions


async def test_a_worker_discards_tables_newer_than_their_changelog_and_serves_the_new_log(
    stack: Stack, keyspace: str, tmp_path: Path
) -> None:
    # no client of the action topic in this process: its metadata refreshes would create the
    # topic again (with the broker's default partition count) as soon as it is deleted
    settings = settings_for(stack, unique("journal_stale"), keyspace)
    await ensure_topic(settings.kafka_access(), settings.topic_spec())
    app_id = unique("app")
    datadir = tmp_path / "data"
    before = WorkerProcess(settings, app_id, datadir)
    before.start()
    try:
        await before.wait_ready()
        async with client_session(settings) as session:
            old_ids = await _append_until_a_changelog_partition_has_two_records(
                HttpJournals(session, [before.url]), settings, app_id
            )
    finally:
        before.stop()
    changelog = _changelog(app_id, APPENDS_TABLE)
    # the local state of a partition holds its changelog up to its last record (once stopped)
    persisted = {
        partition: end - 1
        for partition, end in (
            await end_offsets(settings.kafka_access(), changelog, settings.partitions)
        ).items()
        if end > 0
    }

    await _rebuild_kafka(settings, app_id)
    rebuilt = settings_for(stack, settings.topic, unique("kj_stale_rebuilt"), settings.partitions)
    after = WorkerProcess(rebuilt, app_id, datadir)  # the same data dir, the same app
    after.start()
    try:
        await after.wait_ready()
        log = after.log.read_text(errors="replace")
        discarded = [line for line in log.splitlines() if "discarding the local state" in line]
        for partition, offset in persisted.items():
            said = (
                f"table {APPENDS_TABLE} partition {partition}: its persisted changelog offset "
                f"{offset} is not below the end of {changelog} (0)"
            )
            assert [line for line in discarded if said in line], (said, discarded)
        assert len(discarded) == len(persisted), discarded  # the deletions' table held nothing

        store = await CassandraStore.connect(rebuilt.cassandra_config())
        try:
            async with client_session(rebuilt) as session:
                api = HttpJournals(session, [after.url])
                await api.append(old_ids[0], events(1, 2))  # the same id, in the new log
                await api.append("new", events(1, 1))

                async def the_new_log_is_read(stage: str) -> None:
                    assert await api.read(old_ids[0]) == events(1, 2), stage
                    assert await api.read("new") == events(1, 1), stage
                    for journal_id in old_ids[1:]:
                        assert await api.read(journal_id) == [], (stage, journal_id)

                await the_new_log_is_read("through the tables")
                await wait_replicated(rebuilt, store)
                await the_new_log_is_read("from the store")
        finally:
            await store.close()
    finally:
        after.stop()
