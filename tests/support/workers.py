"""Workers as real processes for tests, and waiting for the agents to replicate."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest

from devtools.workers import REPO, WorkerProcess
from journal.kafka.replicate import wait_replicated as wait_pointers
from journal.kafka.topic import end_offsets
from journal.settings import Settings
from journal.store.base import EventualJournal
from tests.support.harness import unique

__all__ = ["REPO", "WorkerProcess", "end_offsets", "running_workers", "wait_replicated"]


@contextmanager
def running_workers(
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    count: int = 2,
    *,
    app_id: str | None = None,
    env: Mapping[str, str] | None = None,
    static_membership: bool = False,
) -> Iterator[list[WorkerProcess]]:
    """`count` worker processes of one Faust app (a fresh one unless `app_id`), so they share
    the partitions, started, and stopped at exit. `static_membership` gives each an instance id:
    a restarted worker takes its own partitions back."""
    app_id = app_id or unique("app")
    workers = [
        WorkerProcess(
            settings,
            app_id,
            tmp_path_factory.mktemp(f"w{n}") / "data",
            instance_id=f"{app_id}-{n}" if static_membership else None,
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


async def wait_replicated(
    settings: Settings, store: EventualJournal, timeout_s: float = 90.0
) -> None:
    """Until the store's pointers reach the topic's current end: the agents replicated it."""
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await wait_pointers(store, settings.topic, ends, timeout_s)
