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

from eventsourcing.persistence import Tracking

from eventsourcing_kafka_journal.log import NotificationSource
from eventsourcing_kafka_journal.tables import EventsourcingTables


class TrackingPositions:
    def __init__(self, tables: EventsourcingTables, topic: str, log: NotificationSource) -> None:
        self._tables = tables
        self._topic = topic
        self._log = log

    async def max_id(self, application_name: str) -> int | None:
        """The highest position of `application_name` accepted before the call."""
        end = await self._log.end()
        row = await self._tables.tracking(self._topic, application_name)
        highest, as_of = row if row is not None else (0, -1)
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
        await self._tables.save_tracking(
            self._topic, application_name, notification_id, as_of, as_of + 1
        )
