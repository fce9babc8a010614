"""Where a run measures: the stack, fresh settings, a real worker process and its memory."""

from __future__ import annotations

from pathlib import Path

from bench.common import unique
from devtools.workers import WorkerProcess
from journal.settings import Settings


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
