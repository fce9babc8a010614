"""Workers as real processes for tests, and waiting for the agents to replicate."""

from __future__ import annotations

from devtools.workers import REPO, WorkerProcess
from journal.replicate import wait_replicated as wait_pointers
from journal.settings import Settings
from journal.store.base import EventualJournal
from journal.topic import end_offsets

__all__ = ["REPO", "WorkerProcess", "end_offsets", "wait_replicated"]


async def wait_replicated(
    settings: Settings, store: EventualJournal, timeout_s: float = 90.0
) -> None:
    """Until the store's pointers reach the topic's current end: the agents replicated it."""
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await wait_pointers(store, settings.topic, ends, timeout_s)
