"""Writers racing with conditional appends through two workers while one is killed -9 and
restarted every 20 s, and again with Cassandra down (replication stopped): the log decides,
whatever the workers believe and whether or not the store answers.

Every append carries its attempt's id in its events' payloads and as its Idempotency-Key, so
the journal read at the end says which attempts are in it. A writer that gets no verdict (503,
a dropped connection) retries the same attempt (same key, same body) until it gets one.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import aiohttp
import orjson
import pytest

from journal.core.model import EventRecord
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import WorkerProcess, running_workers, wait_replicated, wait_settled

pytestmark = pytest.mark.integration

JOURNALS = 3
WRITERS_PER_JOURNAL = 3
KILLS = 2
KILL_EVERY_S = 20.0
EVENTS_PER_APPEND = 2  # so an unknown outcome can be seen to be whole or absent
OUTAGE_KILL_AFTER_S = 8.0  # with Cassandra down: one kill, this long into the race
VERDICT_DEADLINE_S = 120.0  # a writer retries an attempt without a verdict this long


@dataclass
class Outcomes:
    journal_ids: list[str]
    acked: dict[str, tuple[str, int, int]] = field(
        default_factory=dict
    )  # -> journal, seqNr, offset
    rejected: set[str] = field(default_factory=set)
    retried_after_no_verdict: set[str] = field(default_factory=set)
    unexpected: list[str] = field(default_factory=list)  # statuses no client should get


@pytest.fixture
async def connected(stack: Stack) -> AsyncIterator[Harness]:
    async with harness(stack, unique("kj_cond_race"), "cond_race") as one:
        yield one


def racing_workers(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> AbstractContextManager[list[WorkerProcess]]:
    """Two workers that a kill -9 and restart give their own partitions back."""
    return running_workers(connected.settings, tmp_path_factory, static_membership=True)


async def test_racing_conditional_appends_across_kill_9(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with racing_workers(connected, tmp_path_factory) as workers:
        for worker in workers:
            await worker.wait_ready()
        outcomes = await race(workers, KILLS, KILL_EVERY_S)
        for worker in workers:
            await worker.wait_ready()
        await wait_replicated(connected.settings, connected.journals.store)
        await check(outcomes, direct_reads(connected))


async def test_racing_conditional_appends_with_cassandra_down_across_kill_9(
    connected: Harness, stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The race with replication stopped: verdicts come from the log read from Kafka alone,
    and once Cassandra is back replication stores exactly what the reads showed."""
    with racing_workers(connected, tmp_path_factory) as workers:
        for worker in workers:
            await worker.wait_ready()
        stack.cassandra.stop()
        try:
            outcomes = await race(workers, kills=1, kill_every_s=OUTAGE_KILL_AFTER_S)
            await check(outcomes, direct_reads(connected))  # the store is down: Kafka alone
        finally:
            stack.cassandra.start()
        for worker in workers:
            await worker.wait_ready()
        await wait_replicated(connected.settings, connected.journals.store, timeout_s=240)
        await check(outcomes, stored(connected))
        await check(outcomes, direct_reads(connected))


# A worker killed -9 without a restart leaves the group when its session expires: Faust's
# default, 60 s, made short (the broker's minimum is 6 s) so the survivor takes over soon.
QUICK_SESSION = {"BROKER_SESSION_TIMEOUT": "6", "BROKER_HEARTBEAT_INTERVAL": "1"}


async def test_an_idempotent_retry_after_the_owner_changed_gets_the_first_answer(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The owner acknowledges, dies; the retry reaches the new owner, which never saw the
    first attempt: it finds it in the log and answers its position, adding nothing."""
    journal_id = unique("handed_over")
    body = {"events": [{"seqNr": n, "payload": "first"} for n in (1, 2)], "expectedSeqNr": 0}
    path = journal_path(journal_id, "/events")
    headers = {"Idempotency-Key": "attempt-1"}
    with running_workers(connected.settings, tmp_path_factory, env=QUICK_SESSION) as workers:
        await wait_settled(workers)  # no rebalance left to answer the first attempt 503
        async with client_session(connected.settings) as session:

            async def post(worker: WorkerProcess) -> tuple[int, dict[str, object]]:
                url = worker.url.with_path(path, encoded=True)
                async with session.post(url, json=body, headers=headers) as answer:
                    return answer.status, orjson.loads(await answer.read())

            async def verdicts(worker: WorkerProcess) -> float:
                async with session.get(worker.url / "metrics") as answer:
                    text = await answer.text()
                name = "kafka_journal_conditional_verdicts_total"
                return sum(float(s.split()[-1]) for s in text.splitlines() if s.startswith(name))

            status, first = await post(workers[0])
            assert status == 200, first
            # the owner took the verdict (a request is forwarded to it): that one dies
            owners = [w for w in workers if await verdicts(w) > 0]
            assert len(owners) == 1, "no single worker took the verdict"
            (owner,) = owners
            (survivor,) = [w for w in workers if w is not owner]
            owner.kill9()

            async def verdict() -> tuple[int, dict[str, object]]:
                status, retried = await post(survivor)
                assert status != 503, f"no owner took over: {retried}"
                return status, retried

            # 503 until the survivor owns the partition, then the verdict
            answer = await eventually(verdict, "the survivor takes the partition over")
            assert answer == (200, first)
            assert await post(survivor) == (200, first)
        read = [(r.seq_nr, r.offset) async for r in connected.journals.journal(journal_id).read()]
        assert read == [(1, first["offset"]), (2, first["offset"])]
        await wait_replicated(connected.settings, connected.journals.store)
        assert (await connected.stored(journal_id))[1] == [1, 2]


async def race(workers: list[WorkerProcess], kills: int, kill_every_s: float) -> Outcomes:
    journal_ids = [unique("raced") for _ in range(JOURNALS)]
    outcomes = Outcomes(journal_ids)
    stop = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=30)
    async with client_session(workers[0].settings, timeout=timeout) as session:

        async def call(method: str, path: str, **kwargs: object) -> tuple[int, dict[str, object]]:
            url = random.choice(workers).url.with_path(path, encoded=True)
            async with session.request(method, url, **kwargs) as answer:  # type: ignore[arg-type]
                raw = await answer.read()
                status = answer.status
            if status >= 500 and status != 503:
                outcomes.unexpected.append(f"{method} {path}: {status} {raw!r}")
            return status, orjson.loads(raw) if raw else {}

        async def last_seq_nr(journal_id: str) -> int:
            while True:
                try:
                    status, info = await call("GET", journal_path(journal_id))
                except aiohttp.ClientError:
                    status, info = 0, {}
                if status == 200:
                    seq_nr = info["seqNr"]
                    return seq_nr if isinstance(seq_nr, int) else 0
                await asyncio.sleep(0.2)

        async def attempt(journal_id: str, attempt_id: str, expected: int) -> None:
            body = {
                "events": [
                    {"seqNr": expected + n, "payload": attempt_id}
                    for n in range(1, EVENTS_PER_APPEND + 1)
                ],
                "expectedSeqNr": expected,
            }
            path = journal_path(journal_id, "/events")
            headers = {"Idempotency-Key": attempt_id}
            loop = asyncio.get_running_loop()
            deadline = loop.time() + VERDICT_DEADLINE_S
            while loop.time() < deadline:
                try:
                    status, answer = await call("POST", path, json=body, headers=headers)
                except (aiohttp.ClientError, TimeoutError):
                    status, answer = 0, {}
                if status == 200:
                    offset = answer["offset"]
                    assert isinstance(offset, int)
                    outcomes.acked[attempt_id] = (journal_id, expected + 1, offset)
                    return
                if status == 409:
                    outcomes.rejected.add(attempt_id)
                    return
                if status not in (0, 503):
                    outcomes.unexpected.append(f"POST {path}: {status} {answer}")
                    return
                outcomes.retried_after_no_verdict.add(attempt_id)
                await asyncio.sleep(0.3)
            outcomes.unexpected.append(f"{attempt_id}: no verdict in {VERDICT_DEADLINE_S} s")

        async def writer(journal_id: str, name: str) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                await attempt(journal_id, f"{name}-{n}", await last_seq_nr(journal_id))

        async def chaos() -> None:
            for _ in range(kills):
                await asyncio.sleep(kill_every_s)
                workers[1].kill9()
                workers[1].start()
            await asyncio.sleep(kill_every_s / 2)
            stop.set()

        await asyncio.gather(
            chaos(),
            *(
                writer(journal_id, f"{journal_id}-w{w}")
                for journal_id in journal_ids
                for w in range(WRITERS_PER_JOURNAL)
            ),
        )
    return outcomes


Reads = Callable[[str], AsyncIterator[EventRecord]]


def direct_reads(connected: Harness) -> Reads:
    """A journal through the direct client's reading flow."""
    return lambda journal_id: connected.journals.journal(journal_id).read()


def stored(connected: Harness) -> Reads:
    """A journal as the store alone holds it: what replication wrote."""

    async def read(journal_id: str) -> AsyncIterator[EventRecord]:
        key = connected.journals.journal(journal_id).key
        meta = await connected.journals.store.meta(key)
        if meta is not None:
            async for record in connected.journals.store.read(key, meta):
                yield record

    return read


async def check(outcomes: Outcomes, reads: Reads) -> None:
    assert outcomes.unexpected == []
    assert outcomes.acked and outcomes.rejected, "the race had no winners or no losers"
    acked_seq_nrs = [(journal, seq_nr) for journal, seq_nr, _ in outcomes.acked.values()]
    assert len(acked_seq_nrs) == len(set(acked_seq_nrs)), "a seqNr was acknowledged twice"
    for journal_id in outcomes.journal_ids:
        records = [r async for r in reads(journal_id)]
        in_journal: dict[str, list[tuple[int, int]]] = {}
        for record in records:
            payload = record.event.payload
            attempt_id = str(getattr(payload, "value", None))
            in_journal.setdefault(attempt_id, []).append((record.seq_nr, record.offset))
        assert [r.seq_nr for r in records] == list(range(1, len(records) + 1))
        for attempt_id, found in in_journal.items():
            assert len(found) == EVENTS_PER_APPEND, f"{attempt_id} is partly visible: {found}"
            assert attempt_id not in outcomes.rejected, f"{attempt_id} got a 409 but is visible"
        for attempt_id, (journal, first, offset) in outcomes.acked.items():
            if journal == journal_id:
                assert in_journal.get(attempt_id) == [(first, offset), (first + 1, offset)], (
                    f"{attempt_id} was acknowledged at {first}@{offset} but reads as "
                    f"{in_journal.get(attempt_id)}"
                )
