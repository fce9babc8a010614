"""The stack's Cassandra is a real node: schema, prepared statements and paging through the
journal's asyncio bridge, and a driver session that survives a Cassandra stop/start."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import ExponentialReconnectionPolicy, RoundRobinPolicy
from cassandra.query import PreparedStatement

from journal.store.cql import execute, stream
from stack import Stack
from tests.support.eventually import answered

pytestmark = pytest.mark.integration

KEYSPACE = "kj_stack_test"


@pytest.fixture(scope="module")
def session(stack: Stack) -> Iterator[Session]:
    cluster = Cluster(
        contact_points=stack.cassandra_hosts,
        port=stack.cassandra_port,
        execution_profiles={
            EXEC_PROFILE_DEFAULT: ExecutionProfile(
                load_balancing_policy=RoundRobinPolicy(), request_timeout=10.0
            )
        },
        # The driver's default backs off up to 10 minutes; a service wants to be back soon.
        reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.5, max_delay=4.0),
    )
    session = cluster.connect()
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} "
        "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(
        f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.events "
        "(id text, seq_nr bigint, payload blob, PRIMARY KEY (id, seq_nr))"
    )
    try:
        yield session
    finally:
        cluster.shutdown()


async def write(session: Session, statement: PreparedStatement, params: tuple[Any, ...]) -> None:
    """A write through the journal's bridge; bounded, so a lost callback fails fast."""
    assert await asyncio.wait_for(execute(session, statement, params), 15) == []


async def collect(rows: AsyncIterator[Any]) -> list[Any]:
    return [row async for row in rows]


async def test_prepared_writes_and_paged_reads_through_the_asyncio_bridge(
    session: Session,
) -> None:
    journal = f"journal-{uuid.uuid4()}"
    insert = session.prepare(
        f"INSERT INTO {KEYSPACE}.events (id, seq_nr, payload) VALUES (?, ?, ?)"
    )
    select = session.prepare(f"SELECT seq_nr, payload FROM {KEYSPACE}.events WHERE id = ?")
    rows = 250
    for start in range(1, rows + 1, 50):
        await asyncio.gather(
            *(
                write(session, insert, (journal, seq, f"event {seq}".encode()))
                for seq in range(start, start + 50)
            )
        )
    query = select.bind((journal,))
    query.fetch_size = 7

    first_page = await asyncio.wait_for(execute(session, query), 30)
    streamed = await asyncio.wait_for(collect(stream(session, query)), 60)

    assert len(first_page) == 7, "fetch_size did not page the result"
    assert [(row.seq_nr, row.payload) for row in streamed] == [
        (seq, f"event {seq}".encode()) for seq in range(1, rows + 1)
    ]


async def test_the_same_session_recovers_after_cassandra_stops_and_starts(
    stack: Stack, session: Session
) -> None:
    if not stack.cassandra.controllable:
        pytest.skip("Cassandra is external: this test stops it")
    journal = f"journal-{uuid.uuid4()}"
    insert = session.prepare(
        f"INSERT INTO {KEYSPACE}.events (id, seq_nr, payload) VALUES (?, ?, ?)"
    )
    select = session.prepare(f"SELECT seq_nr FROM {KEYSPACE}.events WHERE id = ?")
    await write(session, insert, (journal, 1, b"before"))

    await asyncio.to_thread(stack.cassandra.stop)
    with pytest.raises(Exception):  # noqa: B017 - the driver's error type depends on timing
        await asyncio.wait_for(execute(session, select, (journal,)), 30)

    await asyncio.to_thread(stack.cassandra.start)
    started = time.monotonic()
    recovered = await answered(
        lambda: asyncio.wait_for(execute(session, select, (journal,)), 15),
        "the session recovers",
        retry_on=(Exception,),  # the driver's error type depends on timing
        interval_s=0.5,
    )
    print(f"session recovered {time.monotonic() - started:.1f} s after Cassandra was up")
    await write(session, insert, (journal, 2, b"after"))

    assert [row.seq_nr for row in recovered] == [1]
    after = await asyncio.wait_for(execute(session, select, (journal,)), 15)
    assert [row.seq_nr for row in after] == [1, 2]
