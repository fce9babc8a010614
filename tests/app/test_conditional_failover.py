"""Writers racing with conditional appends through two workers while one is killed -9 and
restarted every 20 s: the log decides, whatever the workers believe.

Every append carries its attempt's id in its events' payloads and as its Idempotency-Key, so
the journal read at the end says which attempts are in it. A writer that gets no verdict (503,
a dropped connection) retries the same attempt (same key, same body) until it gets one.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest

from stack import Stack
from tests.support.harness import Harness, harness, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import WorkerProcess, wait_replicated

pytestmark = pytest.mark.integration

JOURNALS = 3
WRITERS_PER_JOURNAL = 3
KILLS = 2
KILL_EVERY_S = 20.0
EVENTS_PER_APPEND = 2  # so an unknown outcome can be seen to be whole or absent
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


async def test_racing_conditional_appends_across_kill_9(connected: Harness, tmp_path: Path) -> None:
    app_id = unique("app")
    workers = [
        WorkerProcess(connected.settings, app_id, tmp_path / f"w{n}", instance_id=f"w{n}")
        for n in range(2)
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            await worker.wait_ready()
        outcomes = await race(workers)
        for worker in workers:
            await worker.wait_ready()
        await wait_replicated(connected.settings, connected.journals.store)
        await check(connected, outcomes)
    finally:
        for worker in workers:
            worker.stop()


async def race(workers: list[WorkerProcess]) -> Outcomes:
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
            for _ in range(KILLS):
                await asyncio.sleep(KILL_EVERY_S)
                workers[1].kill9()
                workers[1].start()
            await asyncio.sleep(KILL_EVERY_S / 2)
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


async def check(connected: Harness, outcomes: Outcomes) -> None:
    assert outcomes.unexpected == []
    assert outcomes.acked and outcomes.rejected, "the race had no winners or no losers"
    acked_seq_nrs = [(journal, seq_nr) for journal, seq_nr, _ in outcomes.acked.values()]
    assert len(acked_seq_nrs) == len(set(acked_seq_nrs)), "a seqNr was acknowledged twice"
    for journal_id in outcomes.journal_ids:
        records = [r async for r in connected.journals.journal(journal_id).read()]
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
