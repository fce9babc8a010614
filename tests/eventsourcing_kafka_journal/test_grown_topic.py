"""An application's topic keeps one partition (its offsets are the notification order): an
application refuses a topic a grow moved on (docs/growing.md), naming it, rather than write
on in a topic of several partitions while its notification log stops at the cut."""

from __future__ import annotations

import asyncio

import pytest

from app.grow import grow_topic
from eventsourcing_kafka_journal.connection import Connection
from journal.client.journals import Journals
from journal.core.grow import Phase
from journal.core.model import Event, TextPayload
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.harness import settings_for, unique

pytestmark = pytest.mark.integration


async def grown(stack: Stack, keyspace: str) -> str:
    """A one-partition topic with a journal, grown to two partitions: its name."""
    settings = settings_for(stack, unique("es_grown"), keyspace, 1)
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        async with await Journals.connect(settings, store=store) as journals:
            await journals.journal("aggregate").append([Event(1, payload=TextPayload("x"))])
        grow = await grow_topic(settings, store, 2, yes=True, say=lambda _: None)
        assert grow is not None and grow.phase is Phase.DONE
    finally:
        await store.close()
    return settings.topic


def test_an_application_refuses_a_grown_topic(stack: Stack, keyspace: str) -> None:
    topic = asyncio.run(grown(stack, keyspace))
    settings = settings_for(stack, topic, keyspace, 1)
    with pytest.raises(OSError, match=f"topic {topic} is grown into {topic}.2 \\(done\\)"):
        Connection.open(settings, timeout=60)
