"""Deadlines set before a move, once no worker runs on the old topic (docs/growing.md,
"Deadlines set before the move", agents/carry.py) on the real servers: the workers of the old
topic stop, the topic grows, workers start on the grown topic only, and the journals whose
deadlines were set in the old topic still expire."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.grow import grow_topic
from journal.client.journals import Journals
from journal.core.grow import Phase
from journal.core.model import Event, JournalKey, PayloadMetadata, TextPayload
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique
from tests.support.workers import running_workers, wait_settled

pytestmark = pytest.mark.integration

NEW_PARTITIONS = 4


@pytest.fixture(scope="module")
async def store(stack: Stack, keyspace: str) -> AsyncIterator[CassandraStore]:
    connected = await CassandraStore.connect(settings_for(stack, "x", keyspace).cassandra_config())
    yield connected
    await connected.close()


async def texts(journals: Journals, journal_id: str) -> dict[int, str]:
    found = {}
    async for record in journals.journal(journal_id).read():
        assert isinstance(record.event.payload, TextPayload)
        found[record.seq_nr] = record.event.payload.value
    return found


async def test_journals_whose_deadlines_were_set_before_the_move_expire_on_the_grown_topic(
    stack: Stack, keyspace: str, store: CassandraStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One journal's deadline is set while the old topic's workers run (their tables and
    changelog hold it), another's after they stopped (only the old topic's log does); the
    topic grows and workers of the same app start on the grown topic only. Both journals are
    purged once due; one with a later deadline is kept. Before, nobody purged them: the old
    topic's expiry tables had no worker left."""
    settings = settings_for(stack, unique("journal_carry"), keyspace, 2)
    app_id = unique("app")
    soon, later = PayloadMetadata(expire_after="1 second"), PayloadMetadata(expire_after="1 hour")
    async with await Journals.connect(settings, store=store) as journals:
        with running_workers(settings, tmp_path_factory, app_id=app_id) as workers:
            await wait_settled(workers)
            await journals.journal("handled").append(
                [Event(1, payload=TextPayload("h"))], metadata=soon
            )
            await journals.journal("kept").append(
                [Event(1, payload=TextPayload("k"))], metadata=later
            )

            async def in_the_store() -> bool:  # the workers' agent handled them
                for journal_id in ("handled", "kept"):
                    assert await store.meta(JournalKey(settings.topic, journal_id)) is not None
                return True

            await eventually(in_the_store, "the old topic's workers handled the journals")
        # the old topic's workers are gone: this one is in its log only
        await journals.journal("unhandled").append(
            [Event(1, payload=TextPayload("u"))], metadata=soon
        )
        grow = await grow_topic(settings, store, NEW_PARTITIONS, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
        with running_workers(settings, tmp_path_factory, app_id=app_id):

            async def expired() -> bool:
                assert await texts(journals, "handled") == {}
                assert await texts(journals, "unhandled") == {}
                return True

            await eventually(expired, "the journals due purged on the grown topic")
            assert await texts(journals, "kept") == {1: "k"}
