"""The notification log and tracking positions beyond what the library's cases show: history
past Kafka's retention served from Cassandra, records numbered by another writer, and a
tracking position whose save was lost found in the log."""

from __future__ import annotations

import os
from uuid import uuid4

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition
from eventsourcing.persistence import IntegrityError, StoredEvent, Tracking
from eventsourcing.utils import Environment

from eventsourcing_kafka_journal import Factory
from eventsourcing_kafka_journal.connection import Connection
from eventsourcing_kafka_journal.log import APPLICATION_PARTITION
from eventsourcing_kafka_journal.wire import (
    encode_event,
    tracking_event,
    tracking_headers,
    tracking_journal_id,
)
from tests.support.harness import replicate_now, unique

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("stack_environment")]


def _replicate_and_expire(connection: Connection) -> None:
    """Replicate the topic to Cassandra, then delete every record from Kafka (as retention
    would): what the log serves next comes from the store."""

    async def run() -> None:
        settings = connection.settings
        await replicate_now(settings, connection.store)
        end = await connection.log.end()
        admin = AIOKafkaAdminClient(**settings.kafka_access().client_options())
        await admin.start()
        try:
            tp = TopicPartition(settings.topic, APPLICATION_PARTITION)
            await admin.delete_records({tp: RecordsToDelete(end)})
        finally:
            await admin.close()

    connection.run(run)


def test_history_beyond_retention_and_unnumbered_records_keep_their_ids() -> None:
    """Two inserts numbered by the recorder, then a rival's record appended through the journal
    API (numbered by nobody yet); all replicated and deleted from Kafka. A new factory numbers
    the rival's events from the store, continues the ids after them, and serves every
    notification from any id and as a subscription."""
    env = Environment(env={**os.environ, "KJ_TOPIC": unique("es")})
    first, second, rival = uuid4(), uuid4(), uuid4()
    factory = Factory(env)
    try:
        recorder = factory.application_recorder()
        assert recorder.insert_events([StoredEvent(first, 1, "a", b"1")]) == [1]
        assert recorder.insert_events([StoredEvent(second, 1, "b", b"2")]) == [2]
        journals = factory.connection.journals
        events = [encode_event(StoredEvent(rival, v, f"r{v}", b""), v) for v in (1, 2)]
        factory.connection.run(lambda: journals.journal(str(rival)).append(events))
        _replicate_and_expire(factory.connection)
    finally:
        factory.close()
    factory = Factory(env)
    try:
        recorder = factory.application_recorder()
        assert recorder.max_notification_id() == 4  # the rival's two events: 3 and 4
        assert recorder.insert_events([StoredEvent(first, 2, "a2", b"")]) == [5]
        everything = recorder.select_notifications(None, 10)
        assert [(n.id, n.topic) for n in everything] == [
            (1, "a"),
            (2, "b"),
            (3, "r1"),
            (4, "r2"),
            (5, "a2"),
        ]
        assert [n.id for n in recorder.select_notifications(4, 10)] == [4, 5]
        assert [n.id for n in recorder.select_notifications(2, 2, topics=["r2", "a2"])] == [4, 5]
        with recorder.subscribe(gt=3) as subscription:
            assert [next(subscription).id, next(subscription).id] == [4, 5]
    finally:
        factory.close()


def test_a_position_accepted_without_its_save_is_found_in_the_log() -> None:
    """A position whose record Kafka accepted but whose row was never saved (the process died
    in between; here: appended through the journal API) still counts."""
    factory = Factory(Environment(env={**os.environ, "KJ_TOPIC": unique("es")}))
    try:
        recorder = factory.process_recorder()
        recorder.insert_events([], tracking=Tracking("upstream", 1))
        assert recorder.max_tracking_id("upstream") == 1
        journal = factory.connection.journals.journal(tracking_journal_id("upstream"))
        lost = Tracking("upstream", 7)
        factory.connection.run(
            lambda: journal.append(
                [tracking_event(lost, 2)], expected_seq_nr=1, headers=tracking_headers(lost)
            )
        )
        assert recorder.max_tracking_id("upstream") == 7
        assert recorder.max_tracking_id("other") is None
        with pytest.raises(IntegrityError):
            recorder.insert_events([], tracking=Tracking("upstream", 7))
    finally:
        factory.close()
