"""Expiry across the upgrade that brought the deadlines by time (issue 43): a deployment whose
deadlines were written before `journal-expiry-times` existed (`journal-expiry` holds them, the
time table is missing) still purges them. The worker finds a partition's time entries missing,
loads its window by a scan of `journal-expiry` meanwhile, and builds them while its agent
handles the partition's records (tables/expiry.py). No record comes to their partitions after
the restart but the Purges: the worker learns its position there from its group's committed
offset (agents/replication.py), which it waited for a record to learn before (issue 43).

The old deployment is made from one of this version: while its worker is stopped, the time
table's changelog topic and local state are removed, which leaves what a worker of the old
version left (its other tables, its data dir, its consumer group's offsets)."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from journal.kafka.topic import end_offsets, ensure_topic
from journal.settings import Settings
from stack import Stack
from tables.expiry import EXPIRY_TABLE, EXPIRY_TIMES_TABLE
from tests.app.test_expiry import WITHIN_S, append, assert_gone
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique
from tests.support.http_api import HttpJournals, client_session
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.integration

# past the first worker's stop (a few seconds after the appends), so that it purges none
EXPIRE_AFTER = "PT15S"
PURGED = "expired: purged"  # agents/expiry.py's log line of a purge


def _changelog(app_id: str, table: str) -> str:
    return f"{app_id}-{table}-changelog"  # Faust's name for a table's changelog topic


async def _remove_the_time_table(settings: Settings, app_id: str, datadir: Path) -> None:
    """The time table as a worker of the old version leaves it: no changelog topic (Faust
    creates it again when the worker starts), no local state."""
    topic = _changelog(app_id, EXPIRY_TIMES_TABLE)
    admin = AIOKafkaAdminClient(**settings.kafka_access().client_options())
    await admin.start()
    try:
        await admin.delete_topics([topic])

        async def gone() -> bool:
            return topic not in await admin.list_topics()

        await eventually(gone, f"{topic} deleted")
    finally:
        await admin.close()
    _remove_local_state(datadir)


async def _partitions(settings: Settings, topic: str) -> int | None:
    """The topic's partition count, None if it does not exist (asked without creating it: a
    metadata request naming a missing topic may have the broker create it)."""
    admin = AIOKafkaAdminClient(**settings.kafka_access().client_options())
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            return None
        (described,) = await admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        await admin.close()


def _remove_local_state(datadir: Path) -> None:
    local = sorted(datadir.rglob(f"{EXPIRY_TIMES_TABLE}-*.db"))  # a database per partition
    assert local, f"no local state of {EXPIRY_TIMES_TABLE} under {datadir}"
    for path in local:
        shutil.rmtree(path)


async def test_deadlines_written_before_the_deadlines_by_time_still_expire(
    stack: Stack, keyspace: str, tmp_path: Path
) -> None:
    settings = settings_for(stack, unique("journal_upgrade"), keyspace)
    await ensure_topic(settings.kafka_access(), settings.topic_spec())
    app_id, datadir = unique("app"), tmp_path / "data"
    journal_ids = [unique("old") for _ in range(3)]
    before = WorkerProcess(settings, app_id, datadir)
    before.start()
    try:
        await before.wait_ready()
        async with client_session(settings) as session:
            api = HttpJournals(session, [before.url])
            for journal_id in journal_ids:
                await append(api, journal_id, 1, EXPIRE_AFTER)

        async def written() -> bool:  # the agent wrote their deadlines, in the changelog
            changelog = _changelog(app_id, EXPIRY_TABLE)
            ends = await end_offsets(settings.kafka_access(), changelog, settings.partitions)
            return sum(ends.values()) >= len(journal_ids)

        await eventually(written, "the deadlines in the expiry table's changelog")
    finally:
        before.stop()
    before_log = before.log.read_text(errors="replace")
    assert PURGED not in before_log  # the old worker purged none of them

    stopped = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await _remove_the_time_table(settings, app_id, datadir)
    times_changelog = _changelog(app_id, EXPIRY_TIMES_TABLE)
    assert await _partitions(settings, times_changelog) is None
    after = WorkerProcess(settings, app_id, datadir)  # the same app, data dir and log
    after.start()
    try:
        await after.wait_ready()
        # the new table registers as the others: Faust creates its changelog, as partitioned
        assert await _partitions(settings, times_changelog) == settings.partitions
        async with client_session(settings) as session:
            api = HttpJournals(session, [after.url])
            # no record comes to their partitions after the restart: the agent learns its
            # position from the group's committed offset, so the purger reaches their fences
            # (it waited for a record before, issue 43)
            for journal_id in journal_ids:
                gone = functools.partial(assert_gone, api, journal_id)
                await eventually(gone, f"{journal_id} expired", WITHIN_S)
        ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
        assert sum(ends.values()) == sum(stopped.values()) + len(journal_ids)  # their Purges
        # whether a window was loaded by the scan before its partition was built (the first
        # record builds three journals in one step) is the purger's tick's timing: not told

        def log() -> str:
            return after.log.read_text(errors="replace")[len(before_log) :]

        assert all(f"journal {journal_id} {PURGED}" in log() for journal_id in journal_ids)
        building = log().count("are not indexed by time")
        assert building >= 1

        async def built() -> bool:  # each Purge is a record of its partition: a build step
            return log().count("are indexed by time") == building

        await eventually(built, "every partition built")
    finally:
        after.stop()
