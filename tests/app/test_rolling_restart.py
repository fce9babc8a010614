"""Three workers of one app restarted one after the other (SIGTERM, exit, start, ready) under
appends and reads sent to any of them: every request is answered 200 or 503 with Retry-After, a
client that honours Retry-After completes every operation, nothing is lost or doubled, and the
two workers that are not restarting stay ready throughout.

Dynamic group membership, deliberately: a worker stopped with SIGTERM leaves the group, so the
other two take its partitions over at once, while it is away. (With static membership the
consumer does not leave the group when it stops, so the partitions of a worker that is away stay
with it until it is back or its session expires: tests/app/test_owner_death.py covers that.)

Each journal has one writer, which appends events with the seqNrs it knows come next and reads
the journal back, each request to any worker at random, retrying a 503 after its Retry-After
and a broken connection (a refused one, to the worker that is away) after a pause.
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

from tests.support.eventually import eventually
from tests.support.harness import Harness, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import (
    WorkerProcess,
    metric,
    running_workers,
    wait_replicated,
    wait_settled,
)

pytestmark = pytest.mark.integration

WRITERS = 4
# an operation must be answered within this: a restart's two rebalances take seconds each
RESOLVE_WITHIN_S = 60.0
RETRY_PAUSE_S = 0.2  # after a broken connection, which has no Retry-After to follow
# the others take a leaving worker's partitions once it left the group: far less than its
# session (Faust's default: 60 s) would take to expire
HANDED_OVER_WITHIN_S = 30.0


@dataclass
class Tally:
    """What the clients and the readiness probes saw."""

    answers: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)


@dataclass
class Writer:
    """One journal's only writer, and what it knows the journal holds."""

    session: aiohttp.ClientSession
    urls: list[URL]
    tally: Tally
    rng: random.Random
    journal_id: str = field(default_factory=lambda: unique("rolling"))
    last: int = 0
    history: list[str] = field(default_factory=list)  # the answers so far, for a report

    async def call(self, method: str, path: str, body: bytes | None = None) -> bytes:
        """The body of the 200 that finally answers; anything but a 503 with Retry-After or a
        broken connection is wrong."""
        started = time.monotonic()
        while True:
            url = self.rng.choice(self.urls).with_path(path.split("?")[0], encoded=True)
            url = url.with_query(path.split("?", 1)[1]) if "?" in path else url
            pause = RETRY_PAUSE_S
            seen = f"{time.strftime('%H:%M:%S')} {method} {path.split('/')[-1]} {url.port}:"
            try:
                async with self.session.request(method, url, data=body) as answer:
                    content = await answer.read()
                    self.history.append(f"{seen}{answer.status}")
                    if answer.status == 200:
                        self.tally.answers["200"] += 1
                        return content
                    retry_after = answer.headers.get("Retry-After")
                    kind = f"{answer.status} {orjson.loads(content)['error']['code']}"
                    self.tally.answers[kind] += 1
                    if answer.status == 503 and retry_after is not None:
                        pause = float(retry_after)
                    else:
                        self.tally.wrong.append(f"{kind} {method} {url}: {content!r}")
            except aiohttp.ClientError as error:
                self.tally.answers[f"client {type(error).__name__}"] += 1
                self.history.append(f"{seen}{type(error).__name__}")
            if time.monotonic() - started > RESOLVE_WITHIN_S:
                self.tally.wrong.append(f"unresolved in {RESOLVE_WITHIN_S:g} s: {method} {path}")
                raise AssertionError(self.tally.wrong)
            await asyncio.sleep(pause)

    async def append(self) -> None:
        first, count = self.last + 1, self.rng.randint(1, 3)
        events = [{"seqNr": n, "payload": {"n": n}} for n in range(first, first + count)]
        body = orjson.dumps({"events": events})
        await self.call("POST", journal_path(self.journal_id, "/events?ack=kafka"), body)
        self.last += count

    async def read(self) -> None:
        lines = (await self.call("GET", journal_path(self.journal_id, "/events"))).splitlines()
        got = [(e["seqNr"], e["payload"]["n"]) for e in map(orjson.loads, lines)]
        if got != self.expected():
            recent = "\n  ".join(self.history[-12:])
            self.tally.wrong.append(
                f"read {self.journal_id}: {got}, expected {self.expected()}; after\n  {recent}"
            )

    def expected(self) -> list[tuple[int, int]]:
        return [(n, n) for n in range(1, self.last + 1)]

    async def run(self, done: asyncio.Event) -> None:
        while not done.is_set():
            await self.append()
            await self.read()


async def probe_ready(workers: list[WorkerProcess], tally: Tally, done: asyncio.Event) -> int:
    """Until `done`, /readyz of each of `workers` every 0.1 s: anything but 200 is wrong.
    Returns how many probes answered."""
    probes = 0
    async with aiohttp.ClientSession() as session:
        while not done.is_set():
            for worker in workers:
                try:
                    async with session.get(worker.url / "readyz") as ready:
                        if ready.status != 200:
                            tally.wrong.append(f"{worker.port} not ready: {ready.status}")
                except aiohttp.ClientError as error:
                    tally.wrong.append(f"{worker.port} /readyz failed: {error!r}")
                probes += 1
            await asyncio.sleep(0.1)  # the probe's cadence, not a wait for a condition
    return probes


async def holds_every_partition(workers: list[WorkerProcess], partitions: int) -> bool:
    topic = workers[0].settings.topic
    active = f'kafka_journal_faust_assigned_partitions{{kind="active",topic="{topic}"}}'
    return sum([await metric(worker, active) for worker in workers]) == partitions


async def restart(workers: list[WorkerProcess], leaving: WorkerProcess, tally: Tally) -> None:
    """SIGTERM `leaving`, wait for its exit, start it again, until the group settled; the others
    are probed for readiness meanwhile."""
    others = [w for w in workers if w is not leaving]
    done = asyncio.Event()
    probing = asyncio.create_task(probe_ready(others, tally, done))
    started = time.monotonic()
    await asyncio.to_thread(leaving.stop)  # SIGTERM; after 30 s without an exit, kill -9
    assert leaving.process is not None
    exited_in = time.monotonic() - started
    assert leaving.process.returncode == 0, f"exit {leaving.process.returncode}: {leaving.tail()}"
    await eventually(
        lambda: holds_every_partition(others, leaving.settings.partitions),
        "the other workers took the leaving one's partitions over",
        within_s=HANDED_OVER_WITHIN_S,
    )
    leaving.start()
    await wait_settled(workers)
    done.set()
    probes = await probing
    assert probes > 0
    tally.restarts.append(f"{leaving.port}: exited in {exited_in:.1f} s, {probes} probes")


@pytest.mark.timeout(600)
async def test_a_rolling_restart_fails_no_request_and_loses_nothing(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tally = Tally()
    with running_workers(connected.settings, tmp_path_factory, count=3) as workers:
        await wait_settled(workers)
        async with client_session(connected.settings) as session:
            urls = [w.url for w in workers]
            writers = [Writer(session, urls, tally, random.Random(n)) for n in range(WRITERS)]
            done = asyncio.Event()
            async with asyncio.TaskGroup() as group:
                running = [group.create_task(writer.run(done)) for writer in writers]
                for worker in workers:
                    await restart(workers, worker, tally)
                done.set()
            assert all(task.done() for task in running)
            before = Counter(tally.answers)
            for worker in workers:  # every journal reads back exact from each worker
                for writer in writers:
                    writer.urls = [worker.url]
                    await writer.read()
        await wait_replicated(connected.settings, connected.journals.store)
    for writer in writers:
        meta, stored = await connected.stored(writer.journal_id)
        assert (stored, meta.seq_nr if meta else None) == (
            list(range(1, writer.last + 1)),
            writer.last,
        ), writer.journal_id
    print(f"\nrestarts: {tally.restarts}; answers: {dict(before)}; at {[w.last for w in writers]}")
    assert before["200"] > 0
    assert not tally.wrong, "\n".join(tally.wrong[:20])
