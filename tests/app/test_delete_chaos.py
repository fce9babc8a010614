"""Issue 46: a delete's answer is what reads honour, on any worker, across kill -9 and restarts.

Writers append at the end of a few journals (retried until a 200: a repeat after an unknown
outcome may append twice, which changes nothing checked here), deleters delete up
to the last seqNr acknowledged so far plus or minus a few (past the end included), readers
read, all through two workers, one killed -9 and restarted every 20 s. Every operation's
invocation and answer are timed on one clock, and the history is checked against what a
delete promises:
- a read that started after a delete was answered returns no event at or below its deleteTo;
- a delete started after an append was answered covers that append up to `to`: its deleteTo
  is at least min(to, the append's last seqNr) (a look that missed it answered less);
- no deleteTo is beyond the journal's last accepted seqNr.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import orjson
import pytest
from yarl import URL

from tests.support.harness import Harness, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import WorkerProcess, kill_in_turn

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

JOURNALS = 3
WRITERS = 4
DELETERS = 2
READERS = 2
KILL_EVERY_S = 20.0
KILLS = 2
RESOLVE_WITHIN_S = 90.0  # an append is answered 200 within this, retries included
RETRY_PAUSE_S = 0.2  # after a broken connection (no Retry-After to follow)


@dataclass(frozen=True)
class Op:
    """One answered operation: when it was invoked and answered (monotonic seconds)."""

    journal: str
    invoked: float
    answered: float


@dataclass(frozen=True)
class Append(Op):
    last: int


@dataclass(frozen=True)
class Delete(Op):
    to: int
    delete_to: int  # 0: none


@dataclass(frozen=True)
class Read(Op):
    seq_nrs: tuple[int, ...]


@dataclass
class History:
    appends: list[Append] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    kills: list[str] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)  # the last seqNr acknowledged so far


async def call(
    session: aiohttp.ClientSession, method: str, url: URL, history: History, **kwargs: object
) -> tuple[int, bytes, float]:
    """The status, the body and the pause before another try (a broken connection: 0)."""
    try:
        async with session.request(method, url, **kwargs) as answer:  # type: ignore[arg-type]
            content = await answer.read()
            history.answers[f"{method} {answer.status}"] += 1
            assert answer.status < 500 or answer.status == 503, (answer.status, content)
            pause = float(answer.headers.get("Retry-After", RETRY_PAUSE_S))
            return answer.status, content, pause
    except aiohttp.ClientError as error:  # the worker it went to was killed
        history.answers[f"{method} {type(error).__name__}"] += 1
        return 0, b"", RETRY_PAUSE_S


async def writer(
    n: int, session: aiohttp.ClientSession, urls: list[URL], history: History, done: asyncio.Event
) -> None:
    rng, step = random.Random(n), 0
    while not done.is_set():
        journal = rng.choice(sorted(history.acked))
        body = orjson.dumps({"events": [{"payload": {"w": n, "s": step}}]})
        key, started = f"w{n}-{step}", time.monotonic()
        while time.monotonic() - started < RESOLVE_WITHIN_S:
            url = rng.choice(urls).with_path(journal_path(journal, "/events"), encoded=True)
            status, content, pause = await call(session, "POST", url, history, data=body)
            if status == 200:
                last = orjson.loads(content)["seqNr"]["to"]
                history.appends.append(Append(journal, started, time.monotonic(), last))
                history.acked[journal] = max(history.acked[journal], last)
                break
            assert status in (0, 503), (status, content)
            await asyncio.sleep(pause)
        else:
            raise AssertionError(f"{key}: not answered 200 within {RESOLVE_WITHIN_S} s")
        step += 1


async def deleter(
    n: int, session: aiohttp.ClientSession, urls: list[URL], history: History, done: asyncio.Event
) -> None:
    rng = random.Random(100 + n)
    while not done.is_set():
        journal = rng.choice(sorted(history.acked))
        to = max(1, history.acked[journal] + rng.randint(-3, 4))  # past the end too
        url = rng.choice(urls).with_path(journal_path(journal, "/events"), encoded=True)
        started = time.monotonic()
        status, content, pause = await call(session, "DELETE", url.with_query(to=to), history)
        if status == 200:
            delete_to = orjson.loads(content)["deleteTo"] or 0
            history.deletes.append(Delete(journal, started, time.monotonic(), to, delete_to))
        await asyncio.sleep(pause if status != 200 else rng.uniform(0.05, 0.3))


async def reader(
    n: int, session: aiohttp.ClientSession, urls: list[URL], history: History, done: asyncio.Event
) -> None:
    rng = random.Random(200 + n)
    while not done.is_set():
        journal = rng.choice(sorted(history.acked))
        url = rng.choice(urls).with_path(journal_path(journal, "/events"), encoded=True)
        started = time.monotonic()
        status, content, pause = await call(session, "GET", url, history)
        if status == 200:
            seq_nrs = tuple(orjson.loads(line)["seqNr"] for line in content.splitlines())
            history.reads.append(Read(journal, started, time.monotonic(), seq_nrs))
        else:
            await asyncio.sleep(pause)


def contradictions(history: History, last: dict[str, int]) -> list[str]:
    """Every answer a later answer contradicts (see the module)."""
    wrong = []
    for delete in history.deletes:
        if delete.delete_to > last[delete.journal]:
            wrong.append(f"{delete} is beyond the journal's end {last[delete.journal]}")
        same = delete.journal
        missed = [
            a
            for a in history.appends
            if a.journal == same and a.answered < delete.invoked
            if delete.delete_to < min(delete.to, a.last)
        ]
        wrong += [f"{delete} missed {a}" for a in missed[:1]]
        undone = [
            r
            for r in history.reads
            if r.journal == same and delete.answered < r.invoked
            if r.seq_nrs and r.seq_nrs[0] <= delete.delete_to
        ]
        wrong += [f"{r} returned events {delete} deleted" for r in undone[:1]]
    return wrong


@pytest.mark.timeout(KILLS * KILL_EVERY_S + 2 * RESOLVE_WITHIN_S + 300)
async def test_every_delete_s_answer_is_honoured_by_the_reads_after_it_across_kills(
    connected: Harness, static_workers: list[WorkerProcess]
) -> None:
    workers = static_workers
    for worker in workers:
        await worker.wait_ready()
    history, done = History(), asyncio.Event()
    history.acked = {unique("delete-chaos"): 0 for _ in range(JOURNALS)}
    urls = [w.url for w in workers]
    async with client_session(connected.settings) as session:
        async with asyncio.TaskGroup() as group:
            group.create_task(
                kill_in_turn(workers, history.kills, KILLS, KILL_EVERY_S, done, KILL_EVERY_S / 2)
            )
            for n in range(WRITERS):
                group.create_task(writer(n, session, urls, history, done))
            for n in range(DELETERS):
                group.create_task(deleter(n, session, urls, history, done))
            for n in range(READERS):
                group.create_task(reader(n, session, urls, history, done))
        for worker in workers:
            await worker.wait_ready()
        last = {}
        for journal in history.acked:
            url = workers[0].url.with_path(journal_path(journal), encoded=True)
            status, content, _ = await call(session, "GET", url, history)
            assert status == 200, content
            last[journal] = orjson.loads(content)["seqNr"] or 0

    wrong = contradictions(history, last)
    past_end = sum(d.to > d.delete_to for d in history.deletes)
    print(
        f"\n{len(history.kills)} kills; {len(history.appends)} appends, "
        f"{len(history.deletes)} deletes ({past_end} with `to` past what they deleted), "
        f"{len(history.reads)} reads; {len(wrong)} contradicted; answers: {dict(history.answers)}"
    )
    assert len(history.kills) == KILLS
    assert len(history.deletes) > 10 and len(history.reads) > 10
    assert not wrong, wrong[:5]
