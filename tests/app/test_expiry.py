"""Expiry (issue 29) on a real worker: an Append's `expireAfter` makes its journal go that long
after its last Append, purged by its partition's owner with a Purge in the log, the same through
the worker's HTTP API before and after replication and in Cassandra; a journal appended again in
time lives on until its new deadline. An append the fold rejected (issue 38: a writer answered
409) neither purges its journal nor clears a real deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta

import orjson
import pytest
from aiokafka import TopicPartition

from agents.expiry import EXPIRED_ORIGIN
from journal.codec.actions import parse
from journal.core.model import ActionRecord, AppendHeader, Event, PayloadMetadata, PurgeHeader
from journal.kafka.consumers import raw_record, start_consumer, stop_consumer
from tests.support.eventually import eventually
from tests.support.harness import Harness, unique
from tests.support.http_api import HttpError, HttpJournals, journal_path
from tests.support.workers import WorkerProcess, metric, suite_over, wait_replicated

pytestmark = pytest.mark.integration

WITHIN_S = 60.0  # a deadline plus the purger's tick (1 s), the agent's fence and the produce


@pytest.fixture(scope="module")
def worker(connected: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        connected.settings, unique("app"), tmp_path_factory.mktemp("worker") / "data"
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
async def api(connected: Harness, worker: WorkerProcess) -> AsyncIterator[HttpJournals]:
    await worker.wait_ready()
    async with suite_over(HttpJournals, [worker], connected.settings, connected.store) as api:
        yield api


async def append(api: HttpJournals, journal_id: str, first: int, expire_after: str) -> None:
    body = {
        "events": [{"seqNr": n, "payload": {"n": n}} for n in (first, first + 1)],
        "expireAfter": expire_after,
    }
    await api.request_json(
        "POST",
        journal_path(journal_id, "/events"),
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
    )


async def rejected(
    api: HttpJournals, journal_id: str, seq_nr: int, expire_after: str | None
) -> None:
    """An append of one event at `seq_nr` the worker produces (its memory says the journal
    continues there) and the fold rejects: answered 409, its record in the log."""
    body: dict[str, object] = {"events": [{"seqNr": seq_nr, "payload": {"n": seq_nr}}]}
    if expire_after is not None:
        body["expireAfter"] = expire_after
    with pytest.raises(HttpError, match=": 409 "):
        await api.request_json(
            "POST",
            journal_path(journal_id, "/events"),
            data=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
        )


async def rival(connected: Harness, journal_id: str, first: int, expire_after: str | None) -> None:
    """Another writer (the direct client, outside the worker) appends two events from `first`."""
    await connected.journals.journal(journal_id).append(
        [Event(first), Event(first + 1)], metadata=PayloadMetadata(expire_after=expire_after)
    )


def same_partition(connected: Harness, journal_id: str, prefix: str) -> str:
    """A new journal id in `journal_id`'s partition: the purger takes a partition's due
    journals soonest first, so one's purge tells the other's earlier deadline was looked at."""
    writer = connected.journals.writer
    partition = writer.partition_of(connected.journals.journal(journal_id).key)
    while True:
        other = unique(prefix)
        if writer.partition_of(connected.journals.journal(other).key) == partition:
            return other


async def listed(api: HttpJournals, journal_id: str) -> bool:
    answer = await api.request_json("GET", f"/journals?prefix={journal_id}&limit=10")
    journals = answer["journals"]
    assert isinstance(journals, list)
    return journal_id in journals


async def assert_gone(api: HttpJournals, journal_id: str) -> bool:
    """Read empty, a null pointer, not listed (True, for `eventually`)."""
    assert await api.read(journal_id) == []
    assert await api.info(journal_id) == (None, None)
    assert not await listed(api, journal_id)
    return True


async def actions_of(connected: Harness, journal_id: str) -> list[ActionRecord]:
    """The journal's actions in the log, in order."""
    journals = connected.journals
    tp = TopicPartition(
        connected.settings.topic, journals.writer.partition_of(journals.journal(journal_id).key)
    )
    consumer = await start_consumer(connected.settings.kafka_access())
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        await consumer.seek_to_beginning(tp)
        found: list[ActionRecord] = []
        while await consumer.position(tp) < end:
            for message in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, []):
                action = parse(raw_record(message))
                if action is not None and action.key.id == journal_id:
                    found.append(action)
        return found
    finally:
        await stop_consumer(consumer)


def written(actions: list[ActionRecord], kind: type[object]) -> list[datetime]:
    return [action.timestamp for action in actions if isinstance(action.header, kind)]


async def test_a_journal_expires_after_its_expire_after_and_is_purged_everywhere(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    journal_id = unique("expiring")
    await append(api, journal_id, 1, "PT3S")
    assert await api.info(journal_id) == (2, None)
    assert await listed(api, journal_id)

    await eventually(lambda: assert_gone(api, journal_id), "the journal expired", WITHIN_S)
    actions = await actions_of(connected, journal_id)
    purges = [action for action in actions if isinstance(action.header, PurgeHeader)]
    assert len(purges) == 1
    purge = purges[0]
    assert isinstance(purge.header, PurgeHeader) and purge.header.origin == EXPIRED_ORIGIN
    # the deadline is 3 s after the Append's record was written, and it was kept
    assert purge.timestamp >= written(actions, AppendHeader)[0] + timedelta(seconds=3)
    assert await metric(worker, "kafka_journal_journals_expired_total") >= 1
    # a new deployment's windows are loaded from the deadlines by time, never by a scan
    loads = "kafka_journal_expiry_window_loads_total"
    assert await metric(worker, f'{loads}{{source="index"}}') >= 1
    assert await metric(worker, f'{loads}{{source="scan"}}') == 0

    await wait_replicated(connected.settings, connected.store)  # the agent stored the Purge
    await assert_gone(api, journal_id)
    meta, seq_nrs = await connected.stored(journal_id)
    assert meta is not None and meta.seq_nr is None and meta.offset == purge.offset
    assert seq_nrs == []


async def test_a_journal_appended_again_in_time_lives_until_its_new_deadline(
    api: HttpJournals, connected: Harness
) -> None:
    journal_id = unique("renewed")
    await append(api, journal_id, 1, "PT3S")
    first_deadline = time.time() + 3  # at the latest: the record was written before this
    await append(api, journal_id, 3, "PT8S")  # before the first deadline: the last one counts
    # a moment, not a condition: past the first deadline by two of the purger's ticks, which
    # would have purged it by then
    await asyncio.sleep(first_deadline + 2 - time.time())
    assert await api.info(journal_id) == (4, None)
    assert [e.seq_nr for e in await api.read(journal_id)] == [1, 2, 3, 4]
    assert await listed(api, journal_id)

    await eventually(lambda: assert_gone(api, journal_id), "the journal expired", WITHIN_S)
    actions = await actions_of(connected, journal_id)
    appended, purged = written(actions, AppendHeader), written(actions, PurgeHeader)
    assert len(appended) == 2 and len(purged) == 1
    assert purged[0] >= appended[1] + timedelta(seconds=8)
    await wait_replicated(connected.settings, connected.store)
    assert (await connected.stored(journal_id))[1] == []


async def test_a_rejected_append_with_a_short_expire_after_purges_nothing(
    api: HttpJournals, connected: Harness
) -> None:
    journal_id = unique("rejected-expiry")
    await append(api, journal_id, 1, "P1D")  # the worker remembers the journal at 2
    await rival(connected, journal_id, 3, "1 day")  # the journal is at 4 now
    await rejected(api, journal_id, 3, "PT1S")  # a rival's too: the fold rejects it
    # a journal whose real deadline comes after the rejected append's would-be one, in the
    # same partition: once it is gone, the purger has looked at the rejected one's
    control = same_partition(connected, journal_id, "control")
    await append(api, control, 1, "PT3S")
    await eventually(lambda: assert_gone(api, control), "the control journal expired", WITHIN_S)

    assert await api.info(journal_id) == (4, None)
    assert [e.seq_nr for e in await api.read(journal_id)] == [1, 2, 3, 4]
    assert await listed(api, journal_id)
    actions = await actions_of(connected, journal_id)
    assert written(actions, PurgeHeader) == []
    assert len(written(actions, AppendHeader)) == 3  # the rejected one is in the log


async def test_a_rejected_append_without_expire_after_does_not_clear_a_real_deadline(
    api: HttpJournals, connected: Harness
) -> None:
    journal_id = unique("kept-deadline")
    await append(api, journal_id, 1, "PT3S")  # the worker remembers the journal at 2
    await rival(connected, journal_id, 3, "3 seconds")  # accepted: the deadline is 3 s after it
    await rejected(api, journal_id, 3, None)  # rejected: the deadline stays

    await eventually(lambda: assert_gone(api, journal_id), "the journal expired", WITHIN_S)
    actions = await actions_of(connected, journal_id)
    appended, purged = written(actions, AppendHeader), written(actions, PurgeHeader)
    assert len(appended) == 3 and len(purged) == 1
    assert purged[0] >= appended[1] + timedelta(seconds=3)
