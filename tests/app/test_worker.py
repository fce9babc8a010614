"""Faust workers as real processes against the real servers.

The semantic suite through a worker's HTTP API, replication by the agent, quarantine, kill -9.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from journal.core.model import Ack
from journal.kafka.topic import TopicSpec, end_offsets, ensure_topic
from journal.subscriptions.subscription import SubscriptionPosition
from kjconfig.access import KafkaAccess
from stack import Stack
from tests.journal.journal_contract import JournalContract, events
from tests.support.eventually import answered, eventually
from tests.support.harness import Harness, harness, unique
from tests.support.http_api import HttpError, HttpJournals, client_session
from tests.support.listing import all_pages, existing, populate
from tests.support.show import FULL
from tests.support.workers import WorkerProcess, suite_over, wait_replicated

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class KillShow:
    """The sizes of the kill -9 subscription test: the issue's Show at KJ_SHOW_SCALE=full
    (`tests.support.show`), 8 writers appending 20,000 events to 200 journals on 8 partitions
    (the module's topic then has 8), a subscriber resuming every `session` lines."""

    journals: int
    appends: int  # per journal, one event each
    writers: int
    session: int
    timeout_s: float


KILL_SHOW = KillShow(200, 100, 8, 500, 900.0) if FULL else KillShow(4, 30, 4, 15, 90.0)

T = TypeVar("T")


@pytest.fixture(scope="module")
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "journal_worker", 8 if FULL else 3) as one:
        yield one


@pytest.fixture(scope="module")
def worker(connected: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        connected.settings,
        unique("app"),
        tmp_path_factory.mktemp("worker") / "data",
        instance_id="worker-1",  # static membership: a restart takes its partitions back
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
async def api(connected: Harness, worker: WorkerProcess) -> AsyncIterator[HttpJournals]:
    await worker.wait_ready()
    store = connected.journals.store
    async with suite_over(HttpJournals, [worker], connected.settings, store) as api:
        yield api


class TestOneWorker(JournalContract):
    """`settle()` waits for the agent: reads then come from a replicated store."""


async def test_the_agent_replicates_into_the_store(api: HttpJournals, connected: Harness) -> None:
    await api.append("replicated", events(1, 30))
    await api.settle()
    meta, seq_nrs = await connected.stored("replicated")
    assert meta is not None and meta.seq_nr == 30
    assert seq_nrs == list(range(1, 31))


async def test_a_malformed_record_is_quarantined_and_replication_goes_on(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    settings = connected.settings
    await api.append("poisoned", events(1, 2))
    partition = connected.journals.writer.partition_of(connected.journals.journal("poisoned").key)
    await connected.producer.send_and_wait(
        settings.topic,
        b"\x00garbage",
        key=b"poisoned",
        partition=partition,
        headers=[("journal.action", b'{"append": {"range": {"from": 3, "to": 3}}}')],
    )
    await api.append("poisoned", events(3, 4))
    await api.settle()
    _, seq_nrs = await connected.stored("poisoned")
    assert seq_nrs == [1, 2, 3, 4]
    quarantined = await _count_quarantined(connected)
    assert quarantined == 1
    async with client_session(settings) as session, session.get(worker.url / "metrics") as got:
        text = await got.text()
    assert f'kafka_journal_quarantined_records_total{{topic="{settings.topic}"}} 1' in text


async def test_journal_ids_page_through_what_exists(api: HttpJournals) -> None:
    """The listing over HTTP; the worker reads unreplicated ids from Kafka
    (journal/client/listing.py)."""
    prefix = f"{unique('ids')}/"

    async def page(prefix: str, after: str | None, limit: int) -> tuple[list[str], str | None]:
        query = {
            "prefix": prefix,
            "limit": str(limit),
            **({} if after is None else {"after": after}),
        }
        async with api.session.get(api.at("/journals").with_query(query)) as response:
            assert response.status == 200, await response.text()
            body = await response.json()
        return body["journals"], body["next"]

    await populate(api, prefix, api.settle)
    for stage in ("as written", "replicated"):
        got = await all_pages(page, prefix, 2)
        assert [i for ids in got for i in ids] == existing(prefix), (stage, got)
        await api.settle()


async def _wait_for_lag(
    worker: WorkerProcess, connected: Harness, partition: int, wanted: Callable[[float], bool]
) -> tuple[float, float]:
    """The worker's lag gauges of `partition` (records, seconds) once `wanted(records)`."""
    labels = f'partition="{partition}",topic="{connected.settings.topic}"'
    found: dict[str, float] = {}

    async def lag() -> tuple[float, float]:
        async with (
            client_session(worker.settings) as session,
            session.get(worker.url / "metrics") as got,
        ):
            text = await got.text()
        for line in text.splitlines():
            name, _, value = line.partition(f"{{{labels}}} ")
            if value and name.startswith("kafka_journal_replication_lag_"):
                found[name] = float(value)
        records = found.get("kafka_journal_replication_lag_records")
        assert records is not None and wanted(records), found
        return records, found["kafka_journal_replication_lag_seconds"]

    return await eventually(lag, f"the lag of partition {partition} as wanted")


async def _count_quarantined(connected: Harness) -> int:
    from tests.support.workers import end_offsets

    topic = f"{connected.settings.topic}.quarantine"
    await ensure_topic(connected.settings.kafka_access(), TopicSpec(topic, 1))
    ends = await end_offsets(connected.settings.kafka_access(), topic, 1)
    return ends[0]


async def test_kill_9_of_the_worker_loses_no_acknowledged_event(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    """Appends and reads go on while the worker is killed and restarted: every read is a
    complete prefix, and every acknowledged event ends up in the store exactly once."""
    acked: list[int] = []
    reads: list[tuple[int, list[int]]] = []

    async def retrying(call: Callable[[], Awaitable[T]]) -> T:
        # the worker is down or not ready: retried as a client would
        retry_on = (aiohttp.ClientError, HttpError)
        return await answered(call, "an answer of the restarted worker", retry_on, interval_s=0.2)

    forty = asyncio.Event()

    async def appender() -> None:
        for n in range(1, 151):
            await retrying(lambda n=n: api.append("killed", events(n, n)))  # type: ignore[misc]
            acked.append(n)
            if n == 40:
                forty.set()

    async def reader() -> None:
        while len(acked) < 150:
            known = len(acked)
            got = [e.seq_nr for e in await retrying(lambda: api.read("killed"))]
            reads.append((known, got))
            await asyncio.sleep(0.05)

    work = asyncio.gather(appender(), reader())
    await forty.wait()
    worker.kill9()
    worker.start()
    await work
    await worker.wait_ready()
    await api.settle()
    for known, got in reads:
        assert got == list(range(1, len(got) + 1)) and len(got) >= known
    meta, seq_nrs = await connected.stored("killed")
    assert meta is not None and meta.seq_nr == 150
    assert seq_nrs == list(range(1, 151))


async def test_kill_9_amid_a_backlog_then_every_acknowledged_event_is_stored_once(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    """The worker is killed while it replicates a backlog, with records still unreplicated
    (checked once it is dead, so the store can no longer move): after a restart, every
    acknowledged event is stored once, in the row of the Append that was acknowledged.

    How much is still unreplicated at the kill depends on how fast this machine replicates
    while it appends; a kill that came too late proves nothing, so the next attempt appends
    a backlog four times as large (bounded: the test fails if none was caught)."""
    settings, store = connected.settings, connected.journals.store
    rounds = 60  # appends of 5 events per journal
    positions: dict[tuple[str, int], int] = {}
    appended: list[str] = []

    async def lane(journal_id: str) -> None:
        journal = connected.journals.journal(journal_id)
        for n in range(rounds):
            position = await journal.append(events(n * 5 + 1, n * 5 + 5))
            for seq_nr in range(n * 5 + 1, n * 5 + 6):
                positions[(journal_id, seq_nr)] = position.offset

    async def killed_amid_a_backlog(attempt: int, journals: int) -> bool:
        await api.settle()
        before = await store.pointers(settings.topic)
        ids = [f"backlog-{attempt}-{j}" for j in range(journals)]
        appended.extend(ids)
        await asyncio.gather(*(lane(journal_id) for journal_id in ids))
        ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)

        async def replicating() -> bool:
            pointers = await store.pointers(settings.topic)
            return any(pointers.get(p, -1) > before.get(p, -1) for p in ends)

        # killed as soon as it replicates the backlog: polled often
        await eventually(replicating, "the worker replicates the backlog", interval_s=0.01)
        worker.kill9()
        at_kill = await store.pointers(settings.topic)
        worker.start()
        await worker.wait_ready()
        return sum(end - 1 - at_kill.get(p, -1) for p, end in ends.items()) > 0

    journals = 10
    for attempt in range(3):
        if await killed_amid_a_backlog(attempt, journals):
            break
        journals *= 4
    else:
        raise AssertionError("every backlog was replicated before the kill: nothing proven")
    # no traffic after the restart: the worker catches a partition up on its assignment,
    # not when the partition's next record reaches the agent
    last = rounds * 5
    await api.settle()
    for journal_id in appended:
        key = connected.journals.journal(journal_id).key
        meta = await store.meta(key)
        assert meta is not None and meta.seq_nr == last
        stored = [(r.seq_nr, r.offset) async for r in store.read(key, meta)]
        expected = [(n, positions[(journal_id, n)]) for n in range(1, last + 1)]
        assert stored == expected


async def test_with_cassandra_down_the_worker_serves_and_then_catches_up(
    api: HttpJournals, connected: Harness, stack: Stack
) -> None:
    """Invariants 1, 3, 5: appends and reads go on without the store; replication resumes."""
    await api.append("outage", events(1, 3))
    await api.settle()
    stack.cassandra.stop()
    try:
        for n in range(4, 24):
            await api.append("outage", events(n, n))
        assert await api.delete("outage", 5) == 5
        assert [e.seq_nr for e in await api.read("outage")] == list(range(6, 24))
        assert await api.info("outage") == (23, 5)
    finally:
        stack.cassandra.start()
    await api.settle()
    meta, seq_nrs = await connected.stored("outage")
    assert meta is not None and (meta.seq_nr, meta.delete_to) == (23, 5)
    assert seq_nrs == list(range(6, 24))
    assert [e.seq_nr for e in await api.read("outage")] == list(range(6, 24))


async def test_the_replication_lag_of_each_partition_is_in_the_metrics(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    await api.append("lagging", events(1, 3))
    await api.settle()
    partition = connected.journals.writer.partition_of(connected.journals.journal("lagging").key)
    _, seconds = await _wait_for_lag(worker, connected, partition, lambda r: r == 0)
    assert seconds == 0


async def test_fausts_own_consumer_metrics_are_in_the_metrics(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    """The replicating agent's events and this lone worker's assignment (app/faust_metrics.py)."""
    await api.append("faust-counted", events(1, 2))
    await api.settle()
    async with (
        client_session(worker.settings) as session,
        session.get(worker.url / "metrics") as got,
    ):
        lines = (await got.text()).splitlines()
    samples = {
        name: float(value)
        for name, _, value in (line.rpartition(" ") for line in lines)
        if name.startswith("kafka_journal_faust_")
    }
    assert samples["kafka_journal_faust_events_total"] >= 1
    topic = connected.settings.topic
    assert samples[f'kafka_journal_faust_messages_received_total{{topic="{topic}"}}'] >= 1
    # one worker holds every partition of the action topic
    active = f'kafka_journal_faust_assigned_partitions{{kind="active",topic="{topic}"}}'
    assert samples[active] == connected.settings.partitions
    assert samples["kafka_journal_faust_rebalances_total"] >= 1


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/journals/bad/events", b"{not json", 400, "malformed_json"),
        ("POST", "/journals/bad/events", b'{"events": [{"seqNr": 0}]}', 400, "invalid_seq_nr"),
        ("POST", "/journals/bad/events", b"x" * (5 * 2**20), 413, "body_too_large"),
        ("GET", "/journals/bad/events?from=abc", None, 400, "invalid_query"),
        ("GET", "/no/such/route", None, 404, "not_found"),
    ],
)
async def test_bad_input_gets_a_clear_4xx_from_the_worker(
    api: HttpJournals, method: str, path: str, body: bytes | None, status: int, code: str
) -> None:
    async with api.session.request(method, api.at(path), data=body) as response:
        assert response.status == status
        answer = await response.json()
    assert answer["error"]["code"] == code and answer["error"]["message"]
    await api.append("still-serving", events(1, 1))
    assert await api.read("still-serving") == events(1, 1)
    await api.purge("still-serving")


async def test_a_partition_committed_ahead_of_the_store_is_caught_up_on_assignment(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Faust may commit records a worker had queued but not yet stored when it died. The
    next owner replicates that gap as the partition is assigned, not when the partition's
    next record arrives: here none ever does."""
    async with harness(stack, unique("kj_gap"), "journal_gap") as connected:
        settings = connected.settings
        keys = []
        for j in range(6):
            journal = connected.journals.journal(f"gap-{j}")
            await journal.append(events(1, 2))
            keys.append(journal.key)
        ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
        app_id = unique("app")
        await commit_group(settings.kafka_access(), app_id, settings.topic, ends)
        worker = WorkerProcess(settings, app_id, tmp_path_factory.mktemp("gap") / "data")
        worker.start()
        try:
            await worker.wait_ready()
            await wait_replicated(settings, connected.journals.store)
        finally:
            worker.stop()
        for key in keys:
            meta = await connected.journals.store.meta(key)
            assert meta is not None and meta.seq_nr == 2


async def commit_group(kafka: KafkaAccess, group: str, topic: str, ends: dict[int, int]) -> None:
    """Commit `ends` for the consumer group, as a worker that handled every record would."""
    consumer = AIOKafkaConsumer(group_id=group, **kafka.client_options())
    await consumer.start()
    try:
        tps = {TopicPartition(topic, p): OffsetAndMetadata(end, "") for p, end in ends.items()}
        consumer.assign(list(tps))
        await consumer.commit(tps)
    finally:
        await consumer.stop()


async def test_a_subscription_over_http_resumes_and_shows_no_rejected_append(
    api: HttpJournals, worker: WorkerProcess, connected: Harness
) -> None:
    """The agent's replication writes what subscriptions read: half replicated, half in the
    tail; a conflicting append (from seqNr 1 again) never shows; resuming from a position."""
    ids = [unique("sub") for _ in range(4)]
    for journal_id in ids:
        await api.append(journal_id, events(1, 2))
    await api.settle()
    for journal_id in ids:
        await api.append(journal_id, events(1, 1))  # rejected: does not continue the journal
        await api.append(journal_id, events(3, 3))

    async def lines(query: str) -> list[dict[str, object]]:
        async with api.session.get(f"{worker.url}/events?{query}") as response:
            assert response.status == 200, await response.text()
            return [orjson.loads(line) for line in (await response.read()).splitlines()]

    first = await lines("live=false")
    assert first[-1]["heartbeat"] is True
    got = [(line["id"], line["seqNr"]) for line in first if line.get("id") in ids]
    assert sorted(got) == sorted((j, n) for j in ids for n in (1, 2, 3))
    mine = [line for line in first if line.get("id") in ids]
    # the last event of its Append (1..2 or 3): resuming after it does not repeat it
    middle = next(line for line in mine[len(mine) // 2 :] if line["seqNr"] != 1)
    rest = await lines(f"live=false&after={middle['position']}")
    resumed = {(line["id"], line["seqNr"]) for line in rest if line.get("id") in ids}
    later = {(line["id"], line["seqNr"]) for line in mine[mine.index(middle) + 1 :]}
    assert later <= resumed and (middle["id"], middle["seqNr"]) not in resumed
    async with api.session.get(f"{worker.url}/events?after=nope") as response:
        assert response.status == 400


async def test_kill_9_amid_writes_and_a_resumed_http_subscriber_misses_nothing(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    """Writers append (and race with rejected appends) while the worker that replicates and
    serves the subscription is killed -9 and restarted; the subscriber drops its stream every
    few lines (or loses it with the worker) and resumes from its last position. It gets every
    acknowledged event, in each journal's order within a stream, and no rejected one."""
    ids = [unique("killsub") for _ in range(KILL_SHOW.journals)]
    acked: dict[str, int] = dict.fromkeys(ids, 0)
    got: set[tuple[str, int]] = set()
    # from the topic's end as of now: the module's earlier tests filled it, and reading all
    # of that 15 lines a stream is not what this test is about
    settings = connected.settings
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    position = SubscriptionPosition.of({p: end - 1 for p, end in ends.items()}).encode()
    rejected = events(1, 1)[0]
    appends = KILL_SHOW.appends
    a_third = asyncio.Event()

    async def writer(first: int) -> None:
        mine = [connected.journals.journal(j) for j in ids[first :: KILL_SHOW.writers]]
        for n in range(1, appends + 1):
            for journal in mine:  # straight to Kafka
                await journal.append(events(n, n))
                acked[journal.key.id] = n
                if sum(acked.values()) >= len(ids) * appends // 3:
                    a_third.set()
                if n % 7 == 0:  # from seqNr 1 again: the fold rejects it
                    await journal.append([rejected], ack=Ack.KAFKA)

    async def session(limit: int) -> bool:
        """One stream of at most `limit` lines; whether it reached the end."""
        nonlocal position
        last: dict[str, int] = {}
        query = f"live=false&after={position}" if position else "live=false"
        async with api.session.get(f"{worker.url}/events?{query}") as response:
            if response.status == 503:
                return False  # not ready yet
            assert response.status == 200, await response.text()
            for _ in range(limit):
                raw = await response.content.readline()
                if not raw:
                    return False  # dropped with the worker
                line = orjson.loads(raw)
                position = str(line["position"])
                if line.get("heartbeat"):
                    return True  # the last line of a finite stream
                if line["id"] in ids:
                    key = (str(line["id"]), int(line["seqNr"]))
                    assert key[1] > last.get(key[0], 0), f"{key} out of order"
                    last[key[0]] = key[1]
                    got.add(key)
        return False

    async def subscriber(done: asyncio.Event) -> None:
        while True:
            finished = done.is_set()
            try:
                if await session(KILL_SHOW.session) and finished:
                    return
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.2)  # the worker is down or not ready
            except AssertionError as error:
                if "200" in str(error) or "503" in str(error):
                    await asyncio.sleep(0.2)
                else:
                    raise

    done = asyncio.Event()
    subscribing = asyncio.create_task(subscriber(done))
    writing = asyncio.gather(*(writer(w) for w in range(KILL_SHOW.writers)))
    await asyncio.wait_for(a_third.wait(), KILL_SHOW.timeout_s)
    worker.kill9()
    worker.start()
    await writing
    await worker.wait_ready()
    done.set()
    await asyncio.wait_for(subscribing, 2 * KILL_SHOW.timeout_s)
    assert got == {(j, n) for j in ids for n in range(1, appends + 1)}
