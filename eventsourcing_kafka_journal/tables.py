"""The module's tables in the store's keyspace (`CassandraStore.keyspace_access`) and their
rows: the numbering of an application's notifications and its upstream applications' tracking
positions. What the rows mean, and their buckets and stamps, is log.py's and tracking.py's.

`open_tables` creates the tables if missing when the process creates schema (as the store
does its own); an administrator creates them otherwise. They are not part of the journal's
versioned schema (journal/store/schema.py): code that does not know them never touches them,
so nothing older must refuse them; each table costs a keyspace's creation ~0.2 s, so only the
keyspaces the module uses have them.

Every statement is idempotent and marked so (the store's `idempotent`, at its write
consistency): the writes are stamped, but for `save_numbers`'s, whose row a retry writes again
with the same values and the same client timestamp (the driver takes it once per request,
retries included)."""

from __future__ import annotations

from dataclasses import dataclass

from cassandra.query import SimpleStatement

from journal.store import CassandraStore, KeyspaceAccess, execute, idempotent

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {ks}.eventsourcing_numbers (
        topic text, bucket bigint, first_id bigint, record_offset bigint, events int,
        PRIMARY KEY ((topic, bucket), first_id)) WITH CLUSTERING ORDER BY (first_id DESC)""",
    """CREATE TABLE IF NOT EXISTS {ks}.eventsourcing_numbered (
        topic text PRIMARY KEY, as_of bigint, next_id bigint)""",
    """CREATE TABLE IF NOT EXISTS {ks}.eventsourcing_tracking (
        topic text, application text, notification_id bigint, as_of bigint,
        PRIMARY KEY ((topic), application))""",
)


async def ensure_tables(access: KeyspaceAccess) -> None:
    """Create the module's tables if missing, in a keyspace the store's schema made."""
    for table in _TABLES:
        await execute(access.session, table.format(ks=access.keyspace))


async def open_tables(store: CassandraStore) -> EventsourcingTables:
    """The module's rows in the store's keyspace; the tables are created first if missing,
    when this process creates schema."""
    access = store.keyspace_access
    if access.create_schema:
        await ensure_tables(access)
    return EventsourcingTables(access)


@dataclass(frozen=True, slots=True)
class NumbersRow:
    """A record's notifications: ids `first_id` .. `first_id + events - 1`."""

    first_id: int
    record_offset: int
    events: int


class EventsourcingTables:
    """The module's rows in one keyspace, on the store's session."""

    def __init__(self, access: KeyspaceAccess) -> None:
        self._session = access.session
        self._write_level = access.write_level
        self._numbers = f"{access.keyspace}.eventsourcing_numbers"
        self._numbered = f"{access.keyspace}.eventsourcing_numbered"
        self._tracking = f"{access.keyspace}.eventsourcing_tracking"
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
        rows = await execute(
            self._session,
            self._statement(f"SELECT as_of, next_id FROM {self._numbered} WHERE topic = %s"),
            (topic,),
        )
        return (rows[0].as_of, rows[0].next_id) if rows else None

    async def save_numbered(self, topic: str, as_of: int, next_id: int, stamp: int) -> None:
        await execute(
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
        rows = await execute(
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
        rows = await execute(
            self._session,
            self._statement(
                f"SELECT first_id, record_offset, events FROM {self._numbers} "
                "WHERE topic = %s AND bucket = %s AND first_id < %s LIMIT %s"
            ),
            (topic, bucket, below, count),
        )
        return [NumbersRow(r.first_id, r.record_offset, r.events) for r in rows]

    async def save_numbers(self, topic: str, bucket: int, row: NumbersRow) -> None:
        await execute(
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
        rows = await execute(
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
        await execute(
            self._session,
            self._statement(
                f"INSERT INTO {self._tracking} (topic, application, notification_id, as_of) "
                "VALUES (%s, %s, %s, %s) USING TIMESTAMP %s"
            ),
            (topic, application, notification_id, as_of, stamp),
        )
