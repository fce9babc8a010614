"""Where a run measures: the stack, fresh settings, a real worker process and its memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bench.common import unique
from devtools.workers import WorkerProcess
from journal import Journals
from journal.kafka import JournalProducer, end_offsets
from journal.replication import KafkaQuarantine, replicate_to_now, wait_replicated
from journal.settings import Settings
from journal.store import CassandraStore, EventualJournal, execute


def settings_for(base: Settings, prefix: str, partitions: int = 3) -> Settings:
    """`base` with a fresh topic and keyspace."""
    return base.replace(
        topic=unique(f"bench_{prefix}"),
        keyspace=unique(f"bench_{prefix}"),
        partitions=partitions,
    )


@asynccontextmanager
async def connected(settings: Settings) -> AsyncIterator[tuple[Journals, CassandraStore]]:
    """A store on the settings' keyspace and the direct client reading through it, closed at
    exit: the client's own store would wait for Cassandra (`ConnectingStore`), the bench's
    reads go through a connected one's session."""
    store = await CassandraStore.connect(settings.cassandra_config())
    journals = await Journals.connect(settings, store=store)
    try:
        yield journals, store
    finally:
        await journals.close()
        await store.close()


async def replicate_here(settings: Settings, store: CassandraStore) -> None:
    """Replicate the settings' topic to its end in this process (no worker): a scenario's
    untimed preparation."""
    producer = JournalProducer(settings.kafka_access())
    await producer.start()
    try:
        kafka = settings.kafka_access()
        await replicate_to_now(kafka, store, settings.topic, KafkaQuarantine(producer))
    finally:
        await producer.stop()


def worker(settings: Settings, datadir: Path) -> WorkerProcess:
    """A worker process of its own consumer group, logging warnings only."""
    return WorkerProcess(settings, unique("bench"), datadir, loglevel="warning")


async def settle(settings: Settings, store: EventualJournal, timeout_s: float = 600) -> None:
    """Until the store holds everything appended to the topic so far (the worker caught up)."""
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await wait_replicated(store, settings.topic, ends, timeout_s)


async def thread_pool_tasks(store: CassandraStore) -> dict[str, int]:
    """The active and pending tasks of each thread pool of the node that answers (its
    `system_views.thread_pools`): whether it compacts or flushes in the background."""
    rows = await execute(
        store.keyspace_access.session,
        "SELECT name, active_tasks, pending_tasks FROM system_views.thread_pools",
    )
    return {row.name: row.active_tasks + row.pending_tasks for row in rows}


_BACKGROUND_POOLS = ("CompactionExecutor", "MemtableFlushWriter", "MemtablePostFlush")


async def quiet_cassandra(store: CassandraStore, timeout_s: float = 300) -> float:
    """Until Cassandra runs and queues no compaction or memtable flush: a scenario's writes
    compact in the background for minutes after it, on the cores the next one measures on.
    The seconds waited (at most `timeout_s`: then it measures anyway)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while loop.time() - started < timeout_s:
        tasks = await thread_pool_tasks(store)
        if not any(tasks.get(pool) for pool in _BACKGROUND_POOLS):
            break
        await asyncio.sleep(0.5)
    return loop.time() - started
