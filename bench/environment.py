"""Where a run measures: the stack, fresh settings, a real worker process and its memory."""

from __future__ import annotations

from pathlib import Path

from bench.common import unique
from devtools.workers import WorkerProcess
from journal.replicate import wait_replicated
from journal.settings import Settings
from journal.store.base import EventualJournal
from journal.topic import end_offsets


def settings_for(base: Settings, prefix: str, partitions: int = 3) -> Settings:
    """`base` with a fresh topic and keyspace."""
    return base.replace(
        topic=unique(f"bench_{prefix}"),
        keyspace=unique(f"bench_{prefix}"),
        partitions=partitions,
    )


def worker(settings: Settings, datadir: Path) -> WorkerProcess:
    """A worker process of its own consumer group, logging warnings only."""
    return WorkerProcess(settings, unique("bench"), datadir, loglevel="warning")


async def settle(settings: Settings, store: EventualJournal, timeout_s: float = 600) -> None:
    """Until the store holds everything appended to the topic so far (the worker caught up)."""
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await wait_replicated(store, settings.topic, ends, timeout_s)
