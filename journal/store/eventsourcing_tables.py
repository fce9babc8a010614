"""The rows of the `eventsourcing` library module's tables (`schema.py` creates them): the
numbering of an application's notifications and its upstream applications' tracking
positions. What the rows mean, and their buckets and stamps, is the module's
(`eventsourcing_kafka_journal/log.py`, `tracking.py`). Every statement is idempotent and
marked so (`statements.mark`): the writes are stamped, but for `save_numbers`'s, whose row a
retry writes again with the same values and the same client timestamp (the driver takes it
once per request, retries included)."""

from __future__ import annotations

from dataclasses import dataclass

from cassandra.cluster import Session
from cassandra.query import SimpleStatement

from journal.store import cql
from journal.store.statements import idempotent


@dataclass(frozen=True, slots=True)
class NumbersRow:
    """A record's notifications: ids `first_id` .. `first_id + events - 1`."""

    first_id: int
    record_offset: int
    events: int


class EventsourcingTables:
    """The module's rows in one keyspace, on the store's session."""

    def __init__(self, session: Session, keyspace: str, write_level: int | None = None) -> None:
        self._session = session
        self._write_level = write_level
        self._numbers = f"{keyspace}.eventsourcing_numbers"
        self._numbered = f"{keyspace}.eventsourcing_numbered"
        self._tracking = f"{keyspace}.eventsourcing_tracking"
        self._statements: dict[str, SimpleStatement] = {}

    def _statement(self, query: str, *, unstamped: bool = False) -> SimpleStatement:
        """The query's statement, marked, made once (`unstamped`: `statements.mark`)."""
        statement = self._statements.get(query)
        if statement is None:
            statement = idempotent(query, self._write_level, unstamped=unstamped)
            self._statements[query] = statement
        return statement

    async def numbered(self, topic: str) -> tuple[int, int] | None:
        """The topic's numbering mark: (as_of, next_id); None before the first."""
        rows = await cql.execute(
            self._session,
            self._statement(f"SELECT as_of, next_id FROM {self._numbered} WHERE topic = %s"),
            (topic,),
        )
        return (rows[0].as_of, rows[0].next_id) if rows else None

    async def save_numbered(self, topic: str, as_of: int, next_id: int, stamp: int) -> None:
        await cql.execute(
            self._session,
            self._statement(
                f"INSERT INTO {self._numbered} (topic, as_of, next_id) VALUES (%s, %s, %s) "
                "USING TIMESTAMP %s"
            ),
            (topic, as_of, next_id, stamp),
        )

    async def numbers_at_or_below(
        self, topic: str, bucket: int, first_id: int
    ) -> NumbersRow | None:
        """The bucket's row with the highest first id at or below `first_id`."""
        rows = await cql.execute(
            self._session,
            self._statement(
                f"SELECT first_id, record_offset, events FROM {self._numbers} "
                "WHERE topic = %s AND bucket = %s AND first_id <= %s LIMIT 1"
            ),
            (topic, bucket, first_id),
        )
        return NumbersRow(rows[0].first_id, rows[0].record_offset, rows[0].events) if rows else None

    async def numbers_below(
        self, topic: str, bucket: int, below: int, count: int
    ) -> list[NumbersRow]:
        """Up to `count` of the bucket's rows with first ids below `below`, the highest first."""
        rows = await cql.execute(
            self._session,
            self._statement(
                f"SELECT first_id, record_offset, events FROM {self._numbers} "
                "WHERE topic = %s AND bucket = %s AND first_id < %s LIMIT %s"
            ),
            (topic, bucket, below, count),
        )
        return [NumbersRow(r.first_id, r.record_offset, r.events) for r in rows]

    async def save_numbers(self, topic: str, bucket: int, row: NumbersRow) -> None:
        await cql.execute(
            self._session,
            self._statement(
                f"INSERT INTO {self._numbers} (topic, bucket, first_id, record_offset, events) "
                "VALUES (%s, %s, %s, %s, %s)",
                unstamped=True,  # the numbering is the log's: a row's values never differ
            ),
            (topic, bucket, row.first_id, row.record_offset, row.events),
        )

    async def tracking(self, topic: str, application: str) -> tuple[int, int] | None:
        """An application's tracking row: (notification_id, as_of); None before the first."""
        rows = await cql.execute(
            self._session,
            self._statement(
                f"SELECT notification_id, as_of FROM {self._tracking} WHERE topic = %s "
                "AND application = %s"
            ),
            (topic, application),
        )
        return (rows[0].notification_id, rows[0].as_of) if rows else None

    async def save_tracking(
        self, topic: str, application: str, notification_id: int, as_of: int, stamp: int
    ) -> None:
        await cql.execute(
            self._session,
            self._statement(
                f"INSERT INTO {self._tracking} (topic, application, notification_id, as_of) "
                "VALUES (%s, %s, %s, %s) USING TIMESTAMP %s"
            ),
            (topic, application, notification_id, as_of, stamp),
        )
