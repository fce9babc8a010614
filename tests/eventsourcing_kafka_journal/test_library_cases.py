"""The eventsourcing library's own recorder, factory and application test cases, unmodified,
against the real Kafka and Cassandra. Each recorder gets a fresh topic (its notification log
starts at id 1, as the cases expect); the module shares one keyspace."""

from __future__ import annotations

import os
import threading
from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    ProcessRecorder,
    StoredEvent,
    TrackingRecorder,
)
from eventsourcing.tests import application as library_application
from eventsourcing.tests import persistence as library  # modules: pytest collects no base case
from eventsourcing.utils import Environment

from eventsourcing_kafka_journal import Factory
from eventsourcing_kafka_journal.recorders import (
    KafkaAggregateRecorder,
    KafkaApplicationRecorder,
    KafkaProcessRecorder,
    KafkaTrackingRecorder,
)
from eventsourcing_kafka_journal.wire import decode_snapshot, encode_event
from journal.core.model import Ack
from tests.support.harness import unique

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("stack_environment")]


class FreshTopic:
    """A factory on a fresh topic per recorder, closed after the test."""

    def factory(self: Any) -> Factory:
        env = Environment(env={**os.environ, "KJ_TOPIC": unique("es")})
        factory = InfrastructureFactory.construct(env)
        assert isinstance(factory, Factory)
        self.addCleanup(factory.close)
        return factory


class TestAggregateRecorder(FreshTopic, library.AggregateRecorderTestCase):
    def create_recorder(self) -> AggregateRecorder:
        return self.factory().aggregate_recorder()


class TestApplicationRecorder(FreshTopic, library.ApplicationRecorderTestCase[ApplicationRecorder]):
    def create_recorder(self) -> ApplicationRecorder:
        return self.factory().application_recorder()

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestNonInterleavingNotificationIDs(
    FreshTopic, library.NonInterleavingNotificationIDsBaseCase
):
    def create_recorder(self) -> ApplicationRecorder:
        return self.factory().application_recorder()


class TestTrackingRecorder(FreshTopic, library.TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        return self.factory().tracking_recorder()


class TestProcessRecorder(FreshTopic, library.ProcessRecorderTestCase):
    def create_recorder(self) -> ProcessRecorder:
        return self.factory().process_recorder()


class TrackingRecorderSubclass(KafkaTrackingRecorder):
    pass


class TestInfrastructureFactory(library.InfrastructureFactoryTestCase[Factory]):
    def setUp(self) -> None:
        self.env = Environment("TestCase", {**os.environ, "KJ_TOPIC": unique("es")})
        super().setUp()

    def expected_factory_class(self) -> type[Factory]:
        return Factory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return KafkaAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return KafkaApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return KafkaTrackingRecorder

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return TrackingRecorderSubclass

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return KafkaProcessRecorder


class TestExampleApplication(library_application.ExampleApplicationTestCase):
    expected_factory_topic = "eventsourcing_kafka_journal.factory:Factory"

    def setUp(self) -> None:
        # the application is named BankAccounts: its prefixed variable picks its topic
        os.environ["BANKACCOUNTS_KJ_TOPIC"] = unique("bank_accounts")
        self.addCleanup(os.environ.pop, "BANKACCOUNTS_KJ_TOPIC", None)
        super().setUp()


def test_a_closed_factory_leaves_no_threads() -> None:
    env = Environment(env={**os.environ, "KJ_TOPIC": unique("es")})
    factory = Factory(env)
    factory.application_recorder()  # opens the connection
    factory.close()  # the driver's shared reactor thread may stay: it serves every session
    before = {t for t in threading.enumerate() if t.name != "event_loop"}
    factory = Factory(env)
    recorder = factory.application_recorder()
    assert any(t.name.startswith("kafka-journal") for t in threading.enumerate())
    assert recorder.max_notification_id() is None
    factory.close()
    after = {t for t in threading.enumerate() if t.name != "event_loop"}
    assert after <= before, f"threads left: {after - before}"


def test_a_rejected_append_takes_no_notification_id() -> None:
    """A rival's Append that does not continue the journal (here an unconditional duplicate of
    event 1, produced straight to the topic) is rejected by the fold: no notification, no id,
    and the ids stay contiguous."""
    factory = Factory(Environment(env={**os.environ, "KJ_TOPIC": unique("es")}))
    try:
        recorder = factory.application_recorder()
        first, second = uuid4(), uuid4()
        assert recorder.insert_events([StoredEvent(first, 1, "opened", b"a")]) == [1]
        journals = factory.connection.journals
        rival = [encode_event(StoredEvent(first, 1, "rival", b"r"), 1)]
        factory.connection.run(lambda: journals.journal(str(first)).append(rival, ack=Ack.KAFKA))
        assert recorder.insert_events([StoredEvent(second, 1, "opened", b"b")]) == [2]
        notifications = recorder.select_notifications(None, 10)
        assert [(n.id, n.originator_id, n.topic) for n in notifications] == [
            (1, first, "opened"),
            (2, second, "opened"),
        ]
        assert recorder.select_events(first) == [StoredEvent(first, 1, "opened", b"a")]
    finally:
        factory.close()


def test_an_insert_with_a_clash_in_any_aggregate_records_nothing() -> None:
    factory = Factory(Environment(env={**os.environ, "KJ_TOPIC": unique("es")}))
    try:
        recorder = factory.application_recorder()
        first, second = uuid4(), uuid4()
        recorder.insert_events([StoredEvent(second, 1, "opened", b"b")])
        with pytest.raises(IntegrityError):
            recorder.insert_events(
                [StoredEvent(first, 1, "opened", b"a"), StoredEvent(second, 1, "again", b"c")]
            )
        assert recorder.select_events(first) == []
        assert [n.originator_id for n in recorder.select_notifications(None, 10)] == [second]
    finally:
        factory.close()


def test_ids_come_back_in_the_order_of_the_events_given() -> None:
    """One record per aggregate, so interleaved events are numbered aggregate by aggregate;
    the ids returned still pair with the events in the order given (the library zips them)."""
    factory = Factory(Environment(env={**os.environ, "KJ_TOPIC": unique("es")}))
    try:
        recorder = factory.application_recorder()
        first, second = uuid4(), uuid4()
        given = [
            StoredEvent(first, 1, "a1", b""),
            StoredEvent(second, 1, "b1", b""),
            StoredEvent(first, 2, "a2", b""),
        ]
        ids = recorder.insert_events(given)
        notifications = {n.id: n.topic for n in recorder.select_notifications(None, 10)}
        assert ids is not None
        assert [notifications[i] for i in ids] == ["a1", "b1", "a2"]
    finally:
        factory.close()


def test_two_processes_racing_for_a_version_one_wins_and_both_logs_agree() -> None:
    """Two factories (as two processes would) on one topic insert the same aggregate's next
    version at once: exactly one insert succeeds, and both notification logs hold exactly the
    winner's event, with the same id."""
    env = Environment(env={**os.environ, "KJ_TOPIC": unique("es")})
    factories = [Factory(env), Factory(env)]
    try:
        recorders = [f.application_recorder() for f in factories]
        aggregate = uuid4()
        recorders[0].insert_events([StoredEvent(aggregate, 1, "opened", b"")])
        assert recorders[1].select_events(aggregate)  # both know the aggregate
        start = threading.Barrier(2)
        outcomes: list[str] = []

        def insert(index: int) -> None:
            start.wait()
            try:
                recorders[index].insert_events([StoredEvent(aggregate, 2, f"by {index}", b"")])
                outcomes.append(f"by {index}")
            except IntegrityError:
                outcomes.append("refused")

        threads = [threading.Thread(target=insert, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes)[1] == "refused", outcomes
        winner = sorted(outcomes)[0]
        for recorder in recorders:
            assert recorder.max_notification_id() == 2
            notifications = recorder.select_notifications(None, 10)
            assert [(n.id, n.topic) for n in notifications] == [(1, "opened"), (2, winner)]
            assert [e.topic for e in recorder.select_events(aggregate)] == ["opened", winner]
    finally:
        for factory in factories:
            factory.close()


class Counter(Aggregate):
    INITIAL_VERSION = 0  # versions 0, 1, 2, ... are seqNrs 1, 2, 3, ...: the mapping shows

    def __init__(self) -> None:
        self.count = 0

    @event("Incremented")
    def increment(self) -> None:
        self.count += 1


class Counters(Application[UUID]):
    snapshotting_intervals = {Counter: 2}


def test_an_applications_snapshots_are_its_aggregates_journal_snapshots() -> None:
    """Snapshots taken by the application (versions 0 and 2) are the aggregate journal's at
    seqNrs 1 and 3; the application reads them back, and a Purge of the journal removes them."""
    app = Counters(env={**os.environ, "KJ_TOPIC": unique("es")})
    try:
        counter = Counter()
        counter.increment()
        counter.increment()
        app.save(counter)
        app.take_snapshot(counter.id, version=2)  # a taken version: replaced, not refused
        factory = app.factory
        assert isinstance(factory, Factory)
        connection = factory.connection
        snapshots = connection.journals.journal(str(counter.id)).snapshots
        latest = connection.run(snapshots.latest)
        assert latest is not None
        assert latest.seq_nr == 3
        stored = decode_snapshot(str(counter.id), latest.payload)
        assert stored is not None
        assert (stored.originator_id, stored.originator_version) == (counter.id, 2)
        assert app.snapshots is not None
        assert [s.originator_version for s in app.snapshots.get(counter.id)] == [0, 2]
        assert [
            s.originator_version for s in app.snapshots.get(counter.id, lte=1, desc=True, limit=1)
        ] == [0]
        assert [s.originator_version for s in app.snapshots.get(counter.id, gt=0)] == [2]
        assert app.repository.get(counter.id).count == 2
        recorder = factory.aggregate_recorder("snapshots")
        with pytest.raises(IntegrityError, match="beyond its recorded events"):
            recorder.insert_events([StoredEvent(counter.id, 3, stored.topic, stored.state)])

        connection.run(connection.journals.journal(str(counter.id)).purge)
        assert connection.run(snapshots.latest) is None
        assert list(app.snapshots.get(counter.id)) == []
    finally:
        app.close()
