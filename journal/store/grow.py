"""The registry of a grow in Cassandra (`topic_grow`, journal/store/schema.py): read and
written by the grow command (app/grow.py), read by every process that follows a grow, and
written by replication when it passes a partition's first Seal (`record_cut`: the same value
the command records, whoever is first)."""

from __future__ import annotations

from cassandra import InvalidRequest
from cassandra.cluster import Session

from journal.core.grow import Grow, Phase
from journal.errors import StoreUnavailable
from journal.store import cql
from journal.store.cluster import ROWS_AS_TUPLES
from journal.store.schema import SchemaMissing


def _missing_table(error: StoreUnavailable) -> bool:
    """`topic_grow` is absent: a keyspace at version 3 made before it, not migrated since."""
    return isinstance(error.__cause__, InvalidRequest)


async def read_grow(session: Session, keyspace: str, topic: str) -> Grow | None:
    """The record of a grow of `topic`; None also without the table (no grow can be recorded
    there: the command needs it, `record_plan`)."""
    try:
        # rows as tuples: a direct client reads this after every wave of `ack=kafka` appends
        # (journal/client/growing.py), and the default's namedtuple class per response was
        # ~40% of the read's CPU here (~170 of ~410 us)
        rows = await cql.execute(
            session,
            f"SELECT partition, new_topic, partitions, phase, low, cut "
            f"FROM {keyspace}.topic_grow WHERE topic = %s",
            (topic,),
            ROWS_AS_TUPLES,
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        return None
    if not rows or rows[0][3] is None:
        return None
    _, new_topic, partitions, phase, _, _ = rows[0]
    low = {row[0]: row[4] for row in rows if row[0] is not None and row[4] is not None}
    cut = {row[0]: row[5] for row in rows if row[0] is not None and row[5] is not None}
    return Grow(topic, new_topic, partitions, Phase(phase), low, cut)


async def read_predecessors(session: Session, keyspace: str) -> dict[str, str]:
    """Each grown topic's old topic, over every grow recorded (a handful of rows: one
    partition a grow): the chains `journal.store.keys.key_identity` walks; empty without the
    table."""
    try:
        rows = await cql.execute(
            session,
            f"SELECT DISTINCT topic, new_topic FROM {keyspace}.topic_grow",
            None,
            ROWS_AS_TUPLES,
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        return {}
    return {new_topic: topic for topic, new_topic in rows if new_topic is not None}


async def record_plan(
    session: Session, keyspace: str, topic: str, new_topic: str, partitions: int
) -> Grow:
    """Record the plan unless one is (the first plan wins); the record as it is then.
    SchemaMissing without the table."""
    try:
        await cql.execute(
            session,
            f"UPDATE {keyspace}.topic_grow SET new_topic = %s, partitions = %s, phase = %s "
            "WHERE topic = %s IF phase = null",
            (new_topic, partitions, Phase.PLANNED.value, topic),
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        raise SchemaMissing(
            f"keyspace {keyspace} has no topic_grow table, where a grow is recorded: "
            "kafka-journal schema migrate creates it"
        ) from error
    grow = await read_grow(session, keyspace, topic)
    assert grow is not None  # recorded now or before
    return grow


async def record_phase(session: Session, keyspace: str, topic: str, phase: Phase) -> None:
    await cql.execute(
        session,
        f"UPDATE {keyspace}.topic_grow SET phase = %s WHERE topic = %s",
        (phase.value, topic),
    )


async def record_partition(
    session: Session, keyspace: str, topic: str, partition: int, column: str, offset: int
) -> None:
    """Record `low` or `cut` of an old partition (each written with one value only: an end
    measured once, and the partition's first Seal)."""
    assert column in ("low", "cut")
    await cql.execute(
        session,
        f"UPDATE {keyspace}.topic_grow SET {column} = %s WHERE topic = %s AND partition = %s",
        (offset, topic, partition),
    )


async def read_deadlines_carried(
    session: Session, keyspace: str, topic: str, app: str, partition: int
) -> bool:
    """Whether `app`'s workers carried the deadlines set before the move into their expiry
    tables of `topic`'s `partition` (docs/growing.md); False without the table."""
    try:
        rows = await cql.execute(
            session,
            f"SELECT carried_at FROM {keyspace}.deadlines_carried "
            "WHERE topic = %s AND app = %s AND partition = %s",
            (topic, app, partition),
            ROWS_AS_TUPLES,
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        return False
    return bool(rows)


async def record_deadlines_carried(
    session: Session, keyspace: str, topic: str, app: str, partition: int
) -> None:
    """`read_deadlines_carried` answers True from now on. SchemaMissing without the table."""
    try:
        await cql.execute(
            session,
            f"INSERT INTO {keyspace}.deadlines_carried (topic, app, partition, carried_at) "
            "VALUES (%s, %s, %s, toTimestamp(now()))",
            (topic, app, partition),
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        raise SchemaMissing(
            f"keyspace {keyspace} has no deadlines_carried table: run `kafka-journal schema "
            "migrate`"
        ) from error
