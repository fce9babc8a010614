"""`kafka-journal quarantine list | replay` against a worker that quarantines for real.

"The fix" is simulated: a valid record is written to the quarantine with a reason that no
longer applies, as a record malformed only by a since-fixed decoder would be.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest
from aiokafka import TopicPartition

from app.cli import main
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.topic import end_offsets, quarantine_topic
from journal.replication.quarantine import list_quarantine
from journal.replication.replicate import QUARANTINE_ORIGIN_HEADER, QUARANTINE_REASON_HEADER
from stack import Stack
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness, unique
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "journal_quarantine", 2) as one:
        yield one


@pytest.fixture(scope="module")
def worker(connected: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        connected.settings, unique("app"), tmp_path_factory.mktemp("worker") / "data"
    )
    process.start()
    yield process
    process.stop()


async def kafka_journal(connected: Harness, *arguments: str, exit_code: int = 0) -> None:
    """Run the command line on the harness's topic (in a thread: it runs its own loop)."""
    settings = connected.settings
    flags = ["--kafka-bootstrap", settings.kafka_bootstrap, "--topic", settings.topic]
    assert await asyncio.to_thread(main, [*arguments, *flags]) == exit_code


async def quarantine_end(connected: Harness) -> int:
    topic = quarantine_topic(connected.settings.topic)
    return (await end_offsets(connected.settings.kafka_access(), topic, 1))[0]


async def test_a_quarantined_record_is_listed_and_replayed_once_it_decodes(
    connected: Harness, worker: WorkerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, kafka = connected.settings, connected.settings.kafka_access()
    await worker.wait_ready()
    # a malformed Append the agent quarantines
    partition = connected.journals.writer.partition_of(connected.journals.journal("bad").key)
    sent = await connected.producer.send_and_wait(
        settings.topic,
        b"\x00garbage",
        key=b"bad",
        partition=partition,
        headers=[("journal.action", b'{"append": {"range": {"from": 1, "to": 1}}}')],
    )

    async def quarantined() -> int:
        found = await list_quarantine(kafka, settings.topic)
        assert len(found) == 1, found
        return len(found)

    await eventually(quarantined, "the agent quarantines the malformed record")
    capsys.readouterr()
    await kafka_journal(connected, "quarantine", "list", "--json")
    (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (listed["originPartition"], listed["originOffset"]) == (partition, str(sent.offset))
    assert listed["reason"].startswith("bad ") and listed["key"] == "bad"
    assert (listed["partition"], listed["offset"], listed["replayed"]) == (0, 0, False)

    # a valid Append of journal "healed", quarantined by a reason that no longer applies:
    # a copy of a real record of another journal, keyed "healed"
    template = await connected.journals.journal("template").append(events(1, 2))
    consumer = await start_consumer(kafka)
    try:
        tp = TopicPartition(settings.topic, template.partition)
        consumer.assign([tp])
        consumer.seek(tp, template.offset)
        fetched = await consumer.getmany(tp, timeout_ms=10_000, max_records=1)
        (record,) = fetched[tp]
    finally:
        await stop_consumer(consumer)
    await connected.producer.send_and_wait(
        quarantine_topic(settings.topic),
        record.value,
        key=b"healed",
        headers=[
            *record.headers,
            (QUARANTINE_REASON_HEADER, b"bad events: a bug fixed since"),
            (QUARANTINE_ORIGIN_HEADER, f"{template.partition}:{template.offset}".encode()),
        ],
    )
    before = await quarantine_end(connected)

    await kafka_journal(connected, "quarantine", "replay", exit_code=2)  # named, or --all
    await kafka_journal(connected, "quarantine", "replay", "--all", "--dry-run")
    out = capsys.readouterr().out
    assert "would replay 0:1 (journal healed)" in out, out
    assert "would stay 0:0 (journal bad): bad " in out, out
    await kafka_journal(connected, "quarantine", "replay", "0:1", "--dry-run")
    assert capsys.readouterr().out.splitlines() == [
        f"would replay 0:1 (journal healed) to {settings.topic}",
        "1 would replay, 0 would stay",
    ]
    # without --yes and no terminal to ask at; a record the quarantine does not hold
    await kafka_journal(connected, "quarantine", "replay", "0:1", exit_code=2)
    await kafka_journal(connected, "quarantine", "replay", "0:1", "0:9", "-y", exit_code=1)
    assert "not in the quarantine, or replayed already: 0:9" in capsys.readouterr().err
    assert await quarantine_end(connected) == before  # none of these produced anything
    assert [e.seq_nr async for e in connected.journals.journal("healed").read()] == []

    await kafka_journal(connected, "quarantine", "replay", "0:1", "--yes")
    assert "1 replayed, 0 stays" in capsys.readouterr().out
    # the replayed Append is folded at its new offset: the journal holds it, and the worker
    # replicates it into the store
    assert [e.seq_nr async for e in connected.journals.journal("healed").read()] == [1, 2]

    async def replicated() -> list[int]:
        _, seq_nrs = await connected.stored("healed")
        assert seq_nrs == [1, 2]
        return seq_nrs

    await eventually(replicated, "the worker replicates the replayed Append")
    await kafka_journal(connected, "quarantine", "list", "--json")
    listed_now = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(one["key"], one["replayed"]) for one in listed_now] == [
        ("bad", False),
        ("healed", True),
    ]
    # bounded: only the last 2 records are read (the replay marker takes a place), so the
    # oldest is not shown, and the summary says how many the quarantine holds
    await kafka_journal(connected, "quarantine", "list", "--limit", "2")
    table = capsys.readouterr().out.splitlines()
    (row,) = table[1:-1]  # the header, one record, the summary
    assert row.startswith("0:1 ") and " yes " in row and "a bug fixed since" in row, row
    assert table[-1] == (
        f"1 quarantined records of {settings.topic} shown, the newest; the quarantine holds 3 "
        "records (replay markers included)"
    )
    await kafka_journal(connected, "quarantine", "list", "--limit", "0", exit_code=2)
    # replayed once: a second replay leaves it alone
    end = await quarantine_end(connected)
    await kafka_journal(connected, "quarantine", "replay", "--all", "--yes")
    assert "0 would replay, 1 would stay" in capsys.readouterr().out
    assert await quarantine_end(connected) == end
