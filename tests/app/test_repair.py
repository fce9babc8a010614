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
from app.repair import Examined, Repair, RepairRefused, plan_repair, repair
from journal.core.model import Ack, Position
from journal.errors import JournalTruncated
from journal.kafka.topic import end_offsets
from stack import Stack
from tests.journal.journal_contract import events, seq_nrs
from tests.support.harness import Harness, harness


def test_accepting_the_loss_deletes_what_was_stored_before_the_gap() -> None:
    assert plan_repair("accept-loss", 7) == Repair(delete_to=7)
    assert plan_repair("accept-loss", None) == Repair()  # nothing stored: nothing to delete
    assert plan_repair("accept-loss", 7).record == "a Delete up to seqNr 7"
    assert "continues after it" in plan_repair("accept-loss", 7).describe()
    assert not Repair().produces


def test_purging_starts_the_journal_again() -> None:
    assert plan_repair("purge", 7) == plan_repair("purge", None) == Repair(purge=True)


@pytest.fixture(scope="module")
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "journal_repair", 1) as one:
        yield one


async def kafka_journal(connected: Harness, *arguments: str) -> int:
    """Run the command line on the harness's topic and keyspace (in a thread: its own loop);
    its exit code."""
    s = connected.settings
    flags = ["--kafka-bootstrap", s.kafka_bootstrap, "--topic", s.topic, "--keyspace", s.keyspace]
    flags += ["--cassandra-hosts", s.cassandra_hosts, "--cassandra-port", str(s.cassandra_port)]
    return await asyncio.to_thread(main, [*arguments, *flags])


async def end_offset(connected: Harness) -> int:
    """The end of the harness's one partition: what was produced to it so far."""
    kafka = connected.settings.kafka_access()
    return (await end_offsets(kafka, connected.settings.topic, 1))[0]


async def truncate(connected: Harness, last: Position) -> None:
    """As retention: the records up to `last` are gone, whether replicated or not."""
    admin = AIOKafkaAdminClient(bootstrap_servers=connected.settings.kafka_bootstrap)
    await admin.start()
    try:
        tp = TopicPartition(connected.settings.topic, last.partition)
        await admin.delete_records({tp: RecordsToDelete(last.offset + 1)})
    finally:
        await admin.close()


# the tests of this module share one partition, in order: each leaves it replicated to its end


@pytest.mark.integration
async def test_a_journal_that_reads_is_not_repaired(
    connected: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy = connected.journals.journal("healthy")
    await healthy.append(events(1, 2), ack=Ack.KAFKA)
    await connected.replicate()
    await healthy.append(events(3, 3), ack=Ack.KAFKA)  # in Kafka only: it reads all the same
    end = await end_offset(connected)
    capsys.readouterr()

    # not even asked: the journal does not call for a repair
    assert await kafka_journal(connected, "repair", "healthy", "--accept-loss") == 1
    assert "journal healthy is not truncated" in capsys.readouterr().err
    for how in ("--accept-loss", "--purge"):
        assert await kafka_journal(connected, "repair", "healthy", how, "--yes") == 1
    assert seq_nrs([r.event async for r in healthy.read()]) == [1, 2, 3]
    assert await end_offset(connected) == end  # nothing produced
    await connected.replicate()


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
    await truncate(connected, last)  # the records after the pointer: gone before replication
    for journal in (kept, purged):
        with pytest.raises(JournalTruncated):
            [r async for r in journal.read()]

    end = await end_offset(connected)
    capsys.readouterr()
    assert await kafka_journal(connected, "repair", "kept", "--accept-loss", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "2 records expired before replication" in out, out
    assert "journal kept: the repair is a Delete up to seqNr 2" in out, out
    assert "journal kept: nothing produced (dry run)" in out, out
    # without --yes, and no terminal to ask at: nothing either
    assert await kafka_journal(connected, "repair", "kept", "--accept-loss") == 2
    assert "give --yes" in capsys.readouterr().err
    assert await end_offset(connected) == end
    with pytest.raises(JournalTruncated):
        [r async for r in kept.read()]

    assert await kafka_journal(connected, "repair", "kept", "--accept-loss", "--yes") == 0
    assert "journal kept: produced a Delete up to seqNr 2 at 0:" in capsys.readouterr().out
    assert await kafka_journal(connected, "repair", "purged", "--purge", "-y") == 0
    assert "journal purged: produced a Purge at 0:" in capsys.readouterr().out
    assert await end_offset(connected) == end + 2

    await connected.replicate()  # as a worker would: past the gap, then the repairs
    # accepted: what was stored before the gap is deleted, the journal continues after it
    assert seq_nrs([r.event async for r in kept.read()]) == []
    await kept.append(events(3, 3))
    assert seq_nrs([r.event async for r in kept.read()]) == [3]
    # purged: empty, and it starts again at 1
    assert seq_nrs([r.event async for r in purged.read()]) == []
    await purged.append(events(1, 1))
    assert seq_nrs([r.event async for r in purged.read()]) == [1]
    await connected.replicate()


@pytest.mark.integration
async def test_a_repair_is_not_produced_once_a_worker_passed_the_gap_meanwhile(
    connected: Harness,
) -> None:
    """The operator looks at the prompt while the application appends after the gap and a
    worker passes it: the repair looks again and produces nothing (issue 38: it deleted what
    the store held then, the events accepted after the gap with it)."""
    raced = connected.journals.journal("raced")
    await raced.append(events(1, 2), ack=Ack.KAFKA)
    await connected.replicate()
    await truncate(connected, await raced.append(events(3, 4), ack=Ack.KAFKA))
    asked: list[Examined] = []

    async def meanwhile(found: Examined) -> bool:
        asked.append(found)
        # accepted after the gap (it continues the store's 2), then replicated: the worker
        # passes the gap
        await raced.append(events(3, 3), ack=Ack.KAFKA)
        await connected.replicate()
        return True

    end = await end_offset(connected)
    with pytest.raises(RepairRefused, match="raced is not truncated"):
        await repair(connected.settings, "raced", "accept-loss", meanwhile)
    assert [found.action for found in asked] == [Repair(delete_to=2)]
    assert await end_offset(connected) == end + 1  # the Append, no Delete
    meta, stored = await connected.stored("raced")
    assert meta is not None and (meta.delete_to, stored) == (None, [1, 2, 3])
