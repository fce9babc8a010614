"""Workers as real processes for tests, waiting for their group to settle and for the agents
to replicate."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Literal, TypeVar

import aiohttp
import pytest

from app.http_tokens import client_headers
from devtools.workers import DEFAULT_MEMBERSHIP, REPO, WorkerProcess
from journal.kafka.topic import end_offsets
from journal.replication.replicate import wait_replicated as wait_pointers
from journal.settings import Settings
from journal.store.base import EventualJournal
from tests.support.eventually import WITHIN_S, eventually
from tests.support.harness import unique
from tests.support.http_api import HttpJournals, client_session

__all__ = [
    "REPO",
    "WorkerProcess",
    "end_offsets",
    "metric",
    "running_workers",
    "suite_over",
    "wait_replicated",
    "wait_settled",
]

Api = TypeVar("Api", bound=HttpJournals)


@contextmanager
def running_workers(
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    count: int = 2,
    *,
    app_id: str | None = None,
    env: Mapping[str, str] | None = None,
    static_membership: bool | Literal["default"] = False,
    loglevel: str = "info",
) -> Iterator[list[WorkerProcess]]:
    """`count` worker processes of one Faust app (a fresh one unless `app_id`), so they share
    the partitions, started, and stopped at exit. `static_membership` gives each an instance id:
    a restarted worker takes its own partitions back; "default": the worker's own default (as
    the README starts one: static, its id derived); False: dynamic members."""
    app_id = app_id or unique("app")
    workers = [
        WorkerProcess(
            settings,
            app_id,
            tmp_path_factory.mktemp(f"w{n}") / "data",
            instance_id=(
                DEFAULT_MEMBERSHIP
                if static_membership == "default"
                else f"{app_id}-{n}"
                if static_membership
                else None
            ),
            loglevel=loglevel,
            env=dict(env or {}),
        )
        for n in range(count)
    ]
    try:
        for worker in workers:
            worker.start()
        yield workers
    finally:
        for worker in workers:
            worker.stop()


async def metric(
    worker: WorkerProcess, line_start: str, headers: Mapping[str, str] | None = None
) -> float:
    """The sum of the worker's /metrics samples whose line starts so (0 if none does);
    `headers`: the settings' token unless given (an admin's, with HTTP security on)."""
    headers = client_headers(worker.settings) if headers is None else headers
    async with (
        aiohttp.ClientSession(headers=headers, connector=worker.http_connector()) as session,
        session.get(worker.url / "metrics") as got,
    ):
        assert got.status == 200, await got.text()
        text = await got.text()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(line_start))


async def wait_settled(
    workers: Sequence[WorkerProcess], headers: Mapping[str, str] | None = None
) -> None:
    """Until the workers' group has settled: each ready and holding some of the action topic's
    partitions, all of them between them. Each one's /readyz alone may say 200 too early: the
    first to join holds every partition until the next one's join starts a rebalance.
    `headers`: for /metrics, as `metric`'s."""
    for worker in workers:
        await worker.wait_ready()  # fails at once, with its log, if a worker exited
    settings = workers[0].settings
    active = f'kafka_journal_faust_assigned_partitions{{kind="active",topic="{settings.topic}"}}'

    async def split() -> list[float]:
        for worker in workers:
            async with (
                aiohttp.ClientSession(connector=worker.http_connector()) as session,
                session.get(worker.url / "readyz") as ready,
            ):
                assert ready.status == 200, f"{worker.url}: {ready.status}"
        held = [await metric(worker, active, headers) for worker in workers]
        assert 0 not in held and sum(held) == settings.partitions, f"held: {held}"
        return held

    await eventually(split, f"the workers split the {settings.partitions} partitions")


async def wait_replicated(
    settings: Settings, store: EventualJournal, timeout_s: float = WITHIN_S
) -> None:
    """Until the store's pointers reach the topic's current end: the agents replicated it."""
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await wait_pointers(store, settings.topic, ends, timeout_s)


@asynccontextmanager
async def suite_over(
    kind: type[Api], workers: Sequence[WorkerProcess], settings: Settings, store: EventualJournal
) -> AsyncIterator[Api]:
    """The semantic suite's `kind` over `workers` (round robin) with the settings' token
    (`client_session`); its settle() waits until the agents replicated (`wait_replicated`)."""

    async def settle() -> None:
        await wait_replicated(settings, store)

    async with client_session(settings, connector=workers[0].http_connector()) as session:
        yield kind(session, [worker.url for worker in workers], settle)


async def kill_in_turn(
    workers: Sequence[WorkerProcess],
    kills: list[str],
    count: int,
    every_s: float,
    done: asyncio.Event,
    after_s: float = 0.0,
    killed_at: list[float] | None = None,
) -> None:
    """Kill -9 the workers in turn every `every_s`, each restarted at once, `count` times (each
    kill noted in `kills`, and its monotonic time in `killed_at`); `done` is set `after_s` after
    the last (operations after the last restart too)."""
    while len(kills) < count:
        await asyncio.sleep(every_s)  # the chaos' own cadence, not a wait for a condition
        victim = workers[len(kills) % len(workers)]
        victim.kill9()
        if killed_at is not None:
            killed_at.append(time.monotonic())
        victim.start()
        kills.append(f"{time.strftime('%H:%M:%S')} {victim.port}")
    await asyncio.sleep(after_s)
    done.set()
