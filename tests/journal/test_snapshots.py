"""Snapshots through the direct client, against the real servers: the snapshot suite, and the
races only the direct client can stage (a put whose Mark precedes a Purge it lands after)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from journal.core.model import SEQ_NR_MAX, JsonPayload, Payload, TextPayload
from journal.store import cql
from journal.store.base import Snapshot
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.journal.journal_contract import events
from tests.journal.snapshot_contract import SnapshotContract
from tests.journal.test_journals import Direct
from tests.support.harness import harness, unique
from tests.support.raw_store import keyspace_of, session_of

pytestmark = pytest.mark.integration


@dataclass
class DirectSnapshots(Direct):
    @property
    def max_snapshot_bytes(self) -> int:
        return self.harness.settings.max_snapshot_bytes

    async def put_snapshot(self, journal_id: str, seq_nr: int, payload: Payload) -> None:
        await self.journals.journal(journal_id).snapshots.put(seq_nr, payload)

    async def latest_snapshot(
        self, journal_id: str, max_seq_nr: int | None = None
    ) -> tuple[int, Payload] | None:
        found = await self.journals.journal(journal_id).snapshots.latest(max_seq_nr or SEQ_NR_MAX)
        return None if found is None else (found.seq_nr, found.payload)

    async def delete_snapshots(self, journal_id: str, to: int) -> None:
        await self.journals.journal(journal_id).snapshots.delete(to)


@pytest.fixture(scope="module")
async def api(stack: Stack, keyspace: str) -> AsyncIterator[DirectSnapshots]:
    """Replication runs only in settle(): before it, Kafka holds what the store lacks."""
    async with harness(stack, keyspace, "snapshots") as connected:
        yield DirectSnapshots(connected, replicating=True)


class TestDirectSnapshots(SnapshotContract):
    pass


async def stored_marks(api: DirectSnapshots, journal_id: str) -> list[int]:
    store = api.journals.store
    assert isinstance(store, CassandraStore)
    key = api.journals.journal(journal_id).key
    rows = await cql.execute(
        session_of(store),
        f"SELECT mark FROM {keyspace_of(store)}.snapshots WHERE topic = %s AND id = %s",
        (key.topic, key.id),
    )
    return [row.mark for row in rows]


@pytest.mark.parametrize("replicated_first", [False, True], ids=["unreplicated", "replicated"])
async def test_a_put_that_saw_the_journal_before_a_purge_never_counts(
    api: DirectSnapshots, replicated_first: bool
) -> None:
    """The put's Mark lies before the Purge, its store write lands after it (and after the
    journal started again past its seqNr): the Purge voids it, replicated or not."""
    journal_id = unique("raced")
    journal = api.journals.journal(journal_id)
    await api.append(journal_id, events(1, 6))
    mark = await api.journals.writer.mark(journal.key, "a put's view")
    await api.purge(journal_id)
    await api.append(journal_id, events(1, 7))
    if replicated_first:
        await api.settle()
    late = Snapshot(6, TextPayload("from before the purge"), datetime.now(UTC), mark.offset)
    store = api.journals.store
    assert isinstance(store, CassandraStore)
    await store.put_snapshot(journal.key, late)
    assert await journal.snapshots.latest() is None
    await api.settle()
    assert await journal.snapshots.latest() is None
    assert await stored_marks(api, journal_id) == []  # shadowed by the Purge's deletion
    await journal.snapshots.put(7, JsonPayload.of("after"))
    found = await journal.snapshots.latest()
    assert found is not None and (found.seq_nr, found.payload) == (7, JsonPayload.of("after"))


async def test_latest_honours_a_purge_not_replicated_yet(api: DirectSnapshots) -> None:
    """Before replication the store still holds the old snapshot: the head's Purge hides it."""
    journal_id = unique("head_purge")
    journal = api.journals.journal(journal_id)
    await api.append(journal_id, events(1, 3))
    await journal.snapshots.put(3, JsonPayload.of("old"))
    await api.settle()
    await api.purge(journal_id)
    await api.append(journal_id, events(1, 4))
    assert len(await stored_marks(api, journal_id)) == 1  # still there: not replicated
    assert await journal.snapshots.latest() is None
    await api.settle()
    assert await stored_marks(api, journal_id) == []
