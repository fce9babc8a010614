"""Each upstream application's highest tracking position: a Cassandra row, kept current.

A position rides in the headers of the record it was recorded with (wire.py), so it is
accepted or rejected with its events: the log is its truth. The row `(topic, application)`
says "as of offset `as_of`, the highest accepted position is `notification_id`" (0: none),
so a reader only reads the records after `as_of` (`NotificationSource.tracked`) and saves
what it found. The recorder saves the row once its insert is accepted, so in the usual case
(one process application recording its own positions) `as_of` is the partition's last record
and nothing is read. A save that was lost (the process died between Kafka's verdict and the
save) is found by the next reader in the records after `as_of`: the row may lag, it is never
taken for the truth beyond `as_of`.

Writes carry `USING TIMESTAMP as_of + 1`: of two saves, the one as of the later offset wins
whichever lands last, so a slow save cannot take the row back.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Tracking

from eventsourcing_kafka_journal.log import NotificationSource
from journal.store import cql

TABLE = "eventsourcing_tracking"


class TrackingPositions:
    def __init__(self, session: Any, keyspace: str, topic: str, log: NotificationSource) -> None:
        self._session = session
        self._table = f"{keyspace}.{TABLE}"
        self._topic = topic
        self._log = log

    @classmethod
    async def connect(
        cls, session: Any, keyspace: str, topic: str, log: NotificationSource
    ) -> TrackingPositions:
        positions = cls(session, keyspace, topic, log)
        await cql.execute(
            session,
            f"CREATE TABLE IF NOT EXISTS {positions._table} (topic text, application text, "
            "notification_id bigint, as_of bigint, PRIMARY KEY ((topic), application))",
        )
        return positions

    async def max_id(self, application_name: str) -> int | None:
        """The highest position of `application_name` accepted before the call."""
        end = await self._log.end()
        rows = await cql.execute(
            self._session,
            f"SELECT notification_id, as_of FROM {self._table} WHERE topic = %s "
            "AND application = %s",
            (self._topic, application_name),
        )
        highest, as_of = (rows[0].notification_id, rows[0].as_of) if rows else (0, -1)
        if as_of < end - 1:
            async for tracking, _offset in self._log.tracked(as_of):
                if tracking.application_name == application_name:
                    highest = max(highest, tracking.notification_id)
            await self._save(application_name, highest, end - 1)
        return highest or None

    async def recorded(self, tracking: Tracking, offset: int) -> None:
        """`tracking` was accepted in the record at `offset` (its check found every lower
        position recorded before)."""
        await self._save(tracking.application_name, tracking.notification_id, offset)

    async def _save(self, application_name: str, notification_id: int, as_of: int) -> None:
        await cql.execute(
            self._session,
            f"INSERT INTO {self._table} (topic, application, notification_id, as_of) "
            "VALUES (%s, %s, %s, %s) USING TIMESTAMP %s",
            (self._topic, application_name, notification_id, as_of, as_of + 1),
        )
