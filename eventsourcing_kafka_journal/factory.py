"""The module's one InfrastructureFactory."""

from __future__ import annotations

import threading

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    ProcessRecorder,
)
from eventsourcing.utils import Environment, EnvType, resolve_topic

from eventsourcing_kafka_journal.connection import Connection, settings_of
from eventsourcing_kafka_journal.group import GROUP_VARIABLE
from eventsourcing_kafka_journal.recorders import (
    KafkaAggregateRecorder,
    KafkaApplicationRecorder,
    KafkaProcessRecorder,
    KafkaSnapshotRecorder,
    KafkaTrackingRecorder,
)
from journal.subscriptions import group_id
from kjconfig.settings import lookup

TIMEOUT_VARIABLE = "KJ_RECORDER_TIMEOUT_S"  # seconds a recorder call may take
DEFAULT_TIMEOUT = 60.0


class Factory(InfrastructureFactory[KafkaTrackingRecorder]):
    """Recorders of one application on its topic and keyspace (package docstring).

    The connection (the event loop's thread, Kafka clients, the Cassandra session, the
    notification log) is opened by the first recorder and closed by `close`.
    """

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        self._connection: Connection | None = None
        self._opening = threading.Lock()

    @property
    def connection(self) -> Connection:
        with self._opening:
            if self._connection is None:
                given = lookup(self.env.get, TIMEOUT_VARIABLE)  # or its old name, warned
                timeout = DEFAULT_TIMEOUT if given is None else float(given)
                group = lookup(self.env.get, GROUP_VARIABLE)
                if group is not None:
                    group_id(group)  # InvalidValue if not a group name, before connecting
                self._connection = Connection.open(settings_of(self.env), timeout, group)
            return self._connection

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        if purpose == "snapshots":
            return KafkaSnapshotRecorder(self.connection)
        return KafkaAggregateRecorder(self.connection)

    def application_recorder(self) -> ApplicationRecorder:
        return KafkaApplicationRecorder(self.connection)

    def tracking_recorder(
        self, tracking_recorder_class: type[KafkaTrackingRecorder] | None = None
    ) -> KafkaTrackingRecorder:
        if tracking_recorder_class is None:
            topic = self.env.get(self.TRACKING_RECORDER_TOPIC)
            tracking_recorder_class = resolve_topic(topic) if topic else KafkaTrackingRecorder
        assert tracking_recorder_class is not None
        if not issubclass(tracking_recorder_class, KafkaTrackingRecorder):
            raise TypeError(f"{tracking_recorder_class} is not a KafkaTrackingRecorder")
        return tracking_recorder_class(self.connection)

    def process_recorder(self) -> ProcessRecorder:
        return KafkaProcessRecorder(self.connection)

    def close(self) -> None:
        with self._opening:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        super().close()
