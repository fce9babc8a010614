"""The partition count guard (journal/kafka/guard.py) against the real servers: a topic created
through the project, its count recorded, then partitions added behind the project's back with
Kafka's admin client (as `kafka-topics --alter` does)."""

from __future__ import annotations

import pytest

from journal.client.journals import Journals
from journal.core.model import Ack, Event, TextPayload
from journal.errors import PartitionCountChanged
from journal.store import cql
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.eventually import eventually
from tests.support.partitions import (
    ALTERED,
    RECORDED,
    alter_behind_the_back,
    assert_nothing_misplaced,
    guarded_settings,
    records_by_partition,
)
from tests.support.raw_store import session_of

pytestmark = pytest.mark.integration


def one_event(seq_nr: int = 1) -> list[Event]:
    return [Event(seq_nr, payload=TextPayload("x"))]


async def test_a_running_client_refuses_once_partitions_are_added(
    stack: Stack, keyspace: str
) -> None:
    settings = guarded_settings(stack, keyspace)
    async with await Journals.connect(settings) as journals:
        await journals.journal("before").append(one_event(), ack=Ack.KAFKA)
        await alter_behind_the_back(settings, ALTERED)
        appended = ["before"]

        async def refused() -> PartitionCountChanged | None:
            journal_id = f"during-{len(appended)}"  # many ids: some map elsewhere under 4
            try:
                await journals.journal(journal_id).append(one_event(), ack=Ack.KAFKA)
            except PartitionCountChanged as error:
                return error
            appended.append(journal_id)
            return None

        error = await eventually(refused, "an append refused", within_s=30, interval_s=0.05)
        assert error is not None
        assert (error.live, error.recorded) == (ALTERED, RECORDED)
        assert f"has {ALTERED} partitions, the journal recorded {RECORDED}" in str(error)
        with pytest.raises(PartitionCountChanged):  # reads are refused too
            await journals.journal("before").info()
        with pytest.raises(PartitionCountChanged):
            await journals.journal("before").append(one_event(2))  # a verified one
        assert journals.writer.guard is not None and journals.writer.guard.refusal is not None
    found = await records_by_partition(settings, ALTERED)
    assert_nothing_misplaced(found)
    assert sorted(key for keys in found.values() for key in keys) == sorted(appended)


async def test_a_client_started_after_the_change_refuses_at_start(
    stack: Stack, keyspace: str
) -> None:
    settings = guarded_settings(stack, keyspace)
    async with await Journals.connect(settings) as journals:  # creates and records the topic
        await journals.journal("before").append(one_event(), ack=Ack.KAFKA)
    await alter_behind_the_back(settings, ALTERED)
    with pytest.raises(PartitionCountChanged) as refused:
        await Journals.connect(settings)
    assert (refused.value.live, refused.value.recorded) == (ALTERED, RECORDED)
    assert_nothing_misplaced(await records_by_partition(settings, ALTERED))


async def test_a_keyspace_without_the_record_gets_it_at_the_first_start(
    stack: Stack, keyspace: str
) -> None:
    settings = guarded_settings(stack, keyspace)
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        select = f"SELECT partitions FROM {keyspace}.topic_partitions WHERE topic = %s"
        assert not await cql.execute(session_of(store), select, (settings.topic,))
        async with await Journals.connect(settings, store=store):
            pass
        rows = await cql.execute(session_of(store), select, (settings.topic,))
        assert [row.partitions for row in rows] == [RECORDED]
        # a later process with another count in its settings keeps the recorded one
        assert await store.recorded_partitions(settings.topic, ALTERED) == RECORDED
    finally:
        await store.close()
