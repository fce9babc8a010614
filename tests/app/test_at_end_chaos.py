"""Eight writers appending at the end of one journal through two workers, one worker killed -9
and restarted every 20 s: the journal ends with seqNrs 1..N, every 200's range holds exactly
that writer's events, no event appears twice, and an append whose outcome was unknown (a 503
`outcome_unknown`, or the connection broken by the kill) is wholly present or wholly absent, as
its keyed retry says.

Every append carries an `Idempotency-Key` and is retried with it, as the same request, until a
200 answers: the 200 of a retry is the first attempt's if that one took effect (its range), else
the retry's own. Static group membership, as in test_owner_death.py: the killed worker is
restarted at once and takes its partitions back without a rebalance.
"""

from __future__ import annotations

import asyncio
import os
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

WRITERS = 8
# each writer's, at least: 20 with two kills proves the property in about a minute; the issue's
# 200 (KJ_CHAOS_APPENDS=200) took 7.5 min here, keyed appends at the end being ~4/s a writer
APPENDS = int(os.environ.get("KJ_CHAOS_APPENDS", "20"))
KILL_EVERY_S = 20.0
KILLS = 2  # the writers go on until this many kills happened, whatever APPENDS says
RESOLVE_WITHIN_S = 90.0  # a request is answered 200 within this, retries included
RETRY_PAUSE_S = 0.2  # after a broken connection (no Retry-After to follow)


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Answered:
    """One append as its writer knows it: what it sent, the 200's range and position, and
    whether an attempt before the 200 had an unknown outcome."""

    writer: int
    step: int
    count: int
    seq_nrs: tuple[int, int]
    offset: int
    was_unknown: bool


async def append(
    session: aiohttp.ClientSession, urls: list[URL], path: str, body: bytes, key: str, tally: Tally
) -> tuple[dict[str, object], bool]:
    """The 200's body, and whether an earlier attempt's outcome was unknown."""
    started, unknown = time.monotonic(), False
    rng = random.Random(key)
    while time.monotonic() - started < RESOLVE_WITHIN_S:
        url = rng.choice(urls).with_path(path, encoded=True)
        pause = RETRY_PAUSE_S
        try:
            async with session.post(url, data=body, headers={"Idempotency-Key": key}) as answer:
                content = await answer.read()
                if answer.status == 200:
                    tally.answers["200"] += 1
                    return orjson.loads(content), unknown
                code = orjson.loads(content)["error"]["code"]
                tally.answers[f"{answer.status} {code}"] += 1
                if answer.status != 503:
                    tally.wrong.append(f"{key}: {answer.status} {content!r}")
                    raise AssertionError(f"{key}: {answer.status} {content!r}")
                unknown = unknown or code == "outcome_unknown"
                pause = float(answer.headers["Retry-After"])
        except aiohttp.ClientError as error:  # the worker it went to was killed: unknown
            tally.answers[f"client {type(error).__name__}"] += 1
            unknown = True
        await asyncio.sleep(pause)
    raise AssertionError(f"{key}: not answered 200 within {RESOLVE_WITHIN_S} s")


async def writer(
    n: int,
    session: aiohttp.ClientSession,
    urls: list[URL],
    path: str,
    tally: Tally,
    done: asyncio.Event,
) -> list[Answered]:
    rng, answered, step = random.Random(n), [], 0
    while step < APPENDS or not done.is_set():
        count = rng.randint(1, 3)
        events = [{"payload": {"w": n, "s": step, "i": i}} for i in range(count)]
        body = orjson.dumps({"events": events})
        got, unknown = await append(session, urls, path, body, f"w{n}-{step}", tally)
        seq_nr = got["seqNr"]
        assert isinstance(seq_nr, dict)
        offset = got["offset"]
        assert isinstance(offset, int)
        answered.append(Answered(n, step, count, (seq_nr["from"], seq_nr["to"]), offset, unknown))
        step += 1
    return answered


@pytest.mark.timeout(KILLS * KILL_EVERY_S + 3 * RESOLVE_WITHIN_S + 300)
async def test_writers_at_the_end_through_dying_workers_get_exact_contiguous_ranges(
    connected: Harness, static_workers: list[WorkerProcess]
) -> None:
    workers = static_workers
    for worker in workers:
        await worker.wait_ready()
    tally, done = Tally(), asyncio.Event()
    journal_id = unique("at-end-chaos")
    path = journal_path(journal_id, "/events")
    async with client_session(connected.settings) as session:
        urls = [w.url for w in workers]
        async with asyncio.TaskGroup() as group:
            group.create_task(kill_in_turn(workers, tally.kills, KILLS, KILL_EVERY_S, done))
            tasks = [
                group.create_task(writer(n, session, urls, path, tally, done))
                for n in range(WRITERS)
            ]
        answered = [a for task in tasks for a in task.result()]
        for worker in workers:
            await worker.wait_ready()
        async with session.get(workers[0].url.with_path(path, encoded=True)) as read:
            assert read.status == 200
            lines = [orjson.loads(line) for line in (await read.read()).splitlines()]

    # seqNrs 1..N, contiguous, no event twice
    assert [line["seqNr"] for line in lines] == list(range(1, len(lines) + 1))
    sent = [(line["payload"]["w"], line["payload"]["s"], line["payload"]["i"]) for line in lines]
    assert len(set(sent)) == len(sent), "an event appears twice"
    by_seq_nr = {line["seqNr"]: line for line in lines}
    # every 200's range holds exactly that writer's events of that append, at its offset
    for a in answered:
        low, high = a.seq_nrs
        assert high - low + 1 == a.count, a
        held = [by_seq_nr[s] for s in range(low, high + 1)]
        assert [(h["payload"]["w"], h["payload"]["s"], h["payload"]["i"]) for h in held] == [
            (a.writer, a.step, i) for i in range(a.count)
        ], a
        assert {h["offset"] for h in held} == {a.offset}, a
    # and nothing else: every event is one of an answered append (an unknown attempt that took
    # effect is the one its keyed retry answered; one that did not left nothing)
    assert len(lines) == sum(a.count for a in answered)
    unknown = sum(a.was_unknown for a in answered)
    print(
        f"\n{len(tally.kills)} kills; {len(answered)} appends, {len(lines)} events, "
        f"{unknown} with an unknown outcome on the way; answers: {dict(tally.answers)}"
    )
    assert len(tally.kills) == KILLS
    assert not tally.wrong, tally.wrong[:5]
