"""`kafka-journal repair`: the operator's decision on a truncated journal, as an action.

The truncated state is made as retention would make it: the records after the store's pointer
are deleted from Kafka (`delete_records`) before anything replicated them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition

from app.cli import main
from app.repair import Repair, plan_repair
from journal.core.model import Ack
from journal.errors import JournalTruncated
from stack import Stack
from tests.journal.journal_contract import events, seq_nrs
from tests.support.harness import Harness, harness


def test_accepting_the_loss_deletes_what_was_stored_before_the_gap() -> None:
    assert plan_repair("accept-loss", 7) == Repair(delete_to=7)
    assert plan_repair("accept-loss", None) == Repair()  # nothing stored: nothing to delete
    assert "continues after it" in plan_repair("accept-loss", 7).describe()


def test_purging_starts_the_journal_again() -> None:
    assert plan_repair("purge", 7) == plan_repair("purge", None) == Repair(purge=True)


@pytest.fixture(scope="module")
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "journal_repair", 1) as one:
        yield one


async def kafka_journal(connected: Harness, *arguments: str) -> None:
    """Run the command line on the harness's topic and keyspace (in a thread: its own loop)."""
    s = connected.settings
    flags = ["--kafka-bootstrap", s.kafka_bootstrap, "--topic", s.topic, "--keyspace", s.keyspace]
    flags += ["--cassandra-hosts", s.cassandra_hosts, "--cassandra-port", str(s.cassandra_port)]
    assert await asyncio.to_thread(main, [*arguments, *flags]) == 0


@pytest.mark.integration
async def test_a_truncated_journal_is_repaired_by_accepting_the_loss_or_purging(
    connected: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    journals = connected.journals
    kept, purged = journals.journal("kept"), journals.journal("purged")
    await kept.append(events(1, 2), ack=Ack.KAFKA)
    await purged.append(events(1, 1), ack=Ack.KAFKA)
    await connected.replicate()
    await kept.append(events(3, 4), ack=Ack.KAFKA)
    last = await purged.append(events(2, 2), ack=Ack.KAFKA)
    admin = AIOKafkaAdminClient(bootstrap_servers=connected.settings.kafka_bootstrap)
    await admin.start()
    try:  # as retention: the records after the pointer are gone before replication
        tp = TopicPartition(connected.settings.topic, last.partition)
        await admin.delete_records({tp: RecordsToDelete(last.offset + 1)})
    finally:
        await admin.close()
    for journal in (kept, purged):
        with pytest.raises(JournalTruncated):
            [r async for r in journal.read()]

    capsys.readouterr()
    await kafka_journal(connected, "repair", "kept", "--accept-loss")
    out = capsys.readouterr().out
    assert "2 records expired before replication" in out, out
    assert "journal kept: a Delete up to seqNr 2" in out, out
    await kafka_journal(connected, "repair", "purged", "--purge")
    assert "journal purged: a Purge" in capsys.readouterr().out

    await connected.replicate()  # as a worker would: past the gap, then the repairs
    # accepted: what was stored before the gap is deleted, the journal continues after it
    assert seq_nrs([r.event async for r in kept.read()]) == []
    await kept.append(events(3, 3))
    assert seq_nrs([r.event async for r in kept.read()]) == [3]
    # purged: empty, and it starts again at 1
    assert seq_nrs([r.event async for r in purged.read()]) == []
    await purged.append(events(1, 1))
    assert seq_nrs([r.event async for r in purged.read()]) == [1]
