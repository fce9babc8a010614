"""At scale (issue 43): many journals on 32 partitions, in one run: a worker's and a direct
client's memory per journal and per partition, a fresh worker's restore from the changelogs
against a bare consumer, its start to serving, and a rebalance's pause when a second worker
joins. Appends are written straight by a producer (bench/restore.py's `fill_first_appends`),
one one-event Append a journal; the restore and the pause are bench/restore.py's and
bench/rebalance.py's measures, run on this topic.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from app.http_tokens import client_headers
from bench.common import Row, Section, unique
from bench.environment import settings_for, settle
from bench.group_member import member_env
from bench.read import worker_at
from bench.rebalance import Pause, add_pause_rows, measure_pause
from bench.restore import TABLES, Serving, fill_first_appends, read_all, section_of, serving_stopped
from bench.restore import to_serving as restore_to_serving
from devtools.workers import DEFAULT_MEMBERSHIP, REPO, WorkerProcess
from journal import Journals
from journal.kafka import TopicSpec, end_offsets, ensure_topic
from journal.settings import Settings
from journal.store import CassandraStore
from kjconfig.access import KafkaAccess
from tables.expiry import EXPIRY_TABLE, EXPIRY_TIMES_TABLE
from tables.tables import APPENDS_TABLE, DELETIONS_TABLE

PARTITIONS = 32
MULTIPLES = (1, 2, 5)  # of the client's tail index bound, in journals through each partition
# flat: from 2x the bound to 5x (past it both: the filter of forgotten journals, allocated
# whole at the first journal past the bound, is there at both) less than a tenth of what 1x
# cost above idle
FLAT_SHARE = 0.1

METHOD = (
    "A fresh topic of {partitions} partitions and keyspace; {journals:,} journals of one "
    "one-event Append each, produced straight to their partitions (no HTTP). A direct client "
    "in a process of its own, its tail index bounded at {bound:,} journals a partition "
    "(`KJ_TAIL_MAX_JOURNALS`, so that the journals are 5x the bound), follows all "
    "{partitions} partitions: its RSS idle (the topic empty), then once its index reached the "
    "end after {multiples} the bound of journals flowed through (no worker runs meanwhile: the "
    "index holds every journal up to its bound). A worker of a group of its own on an empty "
    "topic of {partitions} partitions: its start to serving and RSS (the empty worker). A "
    "worker (static member, as the README starts it) indexes and replicates the journals: its "
    "RSS once the store holds them all and its agent handled every record (its tables hold "
    "them), less the empty worker's, per journal and per partition. It stops; a worker of the "
    "same group and identity with a new data dir restores the tables from their changelogs: "
    "bench/restore.py's measures (its start to serving: its agent handled a record appended "
    "once it was ready). Then "
    "bench/rebalance.py's pause on this topic: appends of 10 events paced at {rate:,} "
    "events/s for {seconds:.0f} s with that worker alone, then again with a second worker of "
    "the group started a quarter in. Last, a bare consumer reads the changelogs (the "
    "restore's baseline), the workers stopped."
)


def client_bound(journals: int, partitions: int = PARTITIONS) -> int:
    """The client's tail index bound (journals a partition) that makes `journals` the last
    multiple of it."""
    return max(1, journals // (MULTIPLES[-1] * partitions))


def client_phases(journals: int, partitions: int = PARTITIONS) -> list[int]:
    """The journals written by the end of each phase: each multiple of the bound over all
    partitions, the last one all of them."""
    bound = client_bound(journals, partitions)
    return [bound * partitions * m for m in MULTIPLES[:-1]] + [journals]


@dataclass(frozen=True, slots=True)
class Measured:
    journals: int
    bound: int  # the client's tail index bound, journals a partition
    client_idle_kib: int
    client_kib: Sequence[int]  # at each multiple of the bound
    empty_worker_s: float  # a worker's start to serving, empty tables
    empty_worker_kib: int
    indexed_kib: int  # the worker that indexed every journal, once the store held them all
    indexing_s: float  # its start until the store held them all
    restore: Section  # bench/restore.py's rows
    restored_kib: int  # the fresh worker once it served
    pause: Pause


def per_unit_bytes(loaded_kib: int, empty_kib: int, units: int) -> float:
    """Bytes of resident memory per unit above an empty process's (negative growth shows)."""
    return (loaded_kib - empty_kib) * 1024 / max(1, units)


def client_flat(idle_kib: int, at_kib: Sequence[int]) -> tuple[float, bool]:
    """The growth from the second multiple of the bound to the last (both past it), as a
    share of what the first cost above idle, and whether it is flat (under `FLAT_SHARE`)."""
    first = at_kib[0] - idle_kib
    growth = (at_kib[-1] - at_kib[1]) / max(1, first)
    return growth, growth < FLAT_SHARE


def scale_section(measured: Measured, rate: int, seconds: float) -> Section:
    m = measured
    section = Section(
        "At scale",
        METHOD.format(
            partitions=PARTITIONS,
            journals=m.journals,
            bound=m.bound,
            multiples=", ".join(f"{n}x" for n in MULTIPLES),
            rate=rate,
            seconds=seconds,
        ),
    )
    section.add(
        Row(
            "a direct client's RSS, idle (following every partition)",
            m.client_idle_kib / 1024,
            "MiB",
        )
    )
    held = m.bound * PARTITIONS
    for multiple, kib in zip(MULTIPLES, m.client_kib, strict=True):
        section.add(
            Row(
                f"a direct client's RSS, {multiple}x its bound of journals through it",
                kib / 1024,
                "MiB",
                note=f"{client_phases(m.journals)[MULTIPLES.index(multiple)]:,} journals",
            )
        )
    section.add(
        Row(
            "a direct client: a journal held by its tail index",
            per_unit_bytes(m.client_kib[0], m.client_idle_kib, held),
            "B",
            note=f"at 1x: {held:,} journals held, {m.bound:,} a partition",
        )
    )
    section.add(
        Row(
            "a direct client: a partition followed at its bound",
            per_unit_bytes(m.client_kib[0], m.client_idle_kib, PARTITIONS) / 2**20,
            "MiB",
        )
    )
    growth, flat = client_flat(m.client_idle_kib, m.client_kib)
    section.add(
        Row(
            f"a direct client's growth from {MULTIPLES[1]}x to {MULTIPLES[-1]}x its bound",
            growth * 100,
            "%",
            goal=f"flat: < {FLAT_SHARE:.0%} of its cost at 1x above idle",
            met=flat,
            note=f"{(m.client_kib[-1] - m.client_kib[1]) / 1024:+.1f} MiB",
        )
    )
    section.add(Row("a worker's RSS, empty tables", m.empty_worker_kib / 1024, "MiB"))
    section.add(
        Row(
            f"a worker's RSS, {m.journals:,} journals indexed and replicated",
            m.indexed_kib / 1024,
            "MiB",
            note=f"{m.indexing_s:.0f} s from its start",
        )
    )
    section.add(
        Row(
            "a worker: a journal indexed",
            per_unit_bytes(m.indexed_kib, m.empty_worker_kib, m.journals),
            "B",
        )
    )
    section.add(
        Row(
            "a worker: a partition",
            per_unit_bytes(m.indexed_kib, m.empty_worker_kib, PARTITIONS) / 2**20,
            "MiB",
            note=f"{m.journals // PARTITIONS:,} journals a partition",
        )
    )
    section.add(Row("a fresh worker's RSS, its tables restored", m.restored_kib / 1024, "MiB"))
    section.rows += m.restore.rows
    add_pause_rows(section, m.pause)
    return section


# a direct client in a process of its own, so that its memory is its own: it follows every
# partition (a lookup asks for each), prints its RSS idle, then for each line of end offsets
# on stdin waits until its index reached them and prints its RSS
_CLIENT = """
import asyncio, gc, json, sys
from pathlib import Path
from journal import JournalKey, Journals
from journal.core.index import BEHIND, NotIndexed
from journal.settings import Settings

def rss_kib() -> int:
    gc.collect()
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

async def reached(index, topic: str, ends: dict[int, int]) -> None:
    key = JournalKey("scale-probe", topic)
    for partition, end in ends.items():
        while True:  # each lookup waits for the index, bounded: again while it is behind
            answer = await index.lookup(key, partition, end)
            if not (isinstance(answer, NotIndexed) and answer.reason == BEHIND):
                break

async def main() -> None:
    settings = Settings.from_env()  # the bench's topic, keyspace and bound
    journals = await Journals.connect(settings)
    index = journals.reading.index
    await reached(index, settings.topic, {p: 0 for p in range(settings.partitions)})
    print(json.dumps({"rss_kib": rss_kib()}), flush=True)
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        ends = {int(p): end for p, end in json.loads(line).items()}
        await reached(index, settings.topic, ends)
        print(json.dumps({"rss_kib": rss_kib()}), flush=True)
    await journals.close()

asyncio.run(main())
"""


class _Client:
    """The client process: `rss` sends it end offsets and reads its RSS once it reached
    them."""

    def __init__(self, settings: Settings, bound: int) -> None:
        env = member_env(settings) | {"KJ_TAIL_MAX_JOURNALS": str(bound)}
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CLIENT],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    async def _answer(self) -> int:
        assert self._process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self._process.stdout.readline), 1800)
        if not line:
            raise RuntimeError(f"the client process ended ({self._process.wait()})")
        return int(json.loads(line)["rss_kib"])

    async def idle(self) -> int:
        return await self._answer()

    async def rss(self, ends: dict[int, int]) -> int:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(ends) + "\n")
        self._process.stdin.flush()
        return await self._answer()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


async def _client_memory(settings: Settings, journals: int, bound: int) -> tuple[int, list[int]]:
    """The client's RSS idle, then at each multiple of its bound, the journals written in
    between."""
    kafka = settings.kafka_access()
    client = _Client(settings, bound)
    try:
        idle = await client.idle()
        at: list[int] = []
        written = 0
        for phase_end in client_phases(journals):
            await fill_first_appends(
                kafka, settings.topic, phase_end - written, PARTITIONS, first=written
            )
            written = phase_end
            ends = await end_offsets(kafka, settings.topic, PARTITIONS)
            at.append(await client.rss(ends))
        return idle, at
    finally:
        await asyncio.to_thread(client.close)


async def changelogs_first(kafka: KafkaAccess, app_id: str, partitions: int) -> None:
    """Create a new group's four table changelogs (compacted, as Faust makes them) before its
    first worker starts: a fresh worker of 32 partitions on this loaded host had Faust assign
    before the expiry tables' changelogs it had just created were in its metadata ("Ignoring
    missing topic"), and its agent then failed every record with `PartitionsMismatch` (seen
    twice here at load ~14, with and without this branch's changes; not the scenario's
    subject)."""
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:
        brokers = len((await admin.describe_cluster())["brokers"])
        tables = (APPENDS_TABLE, DELETIONS_TABLE, EXPIRY_TABLE, EXPIRY_TIMES_TABLE)
        await admin.create_topics(
            [
                NewTopic(
                    f"{app_id}-{table}-changelog",
                    partitions,
                    min(3, brokers),
                    topic_configs={"cleanup.policy": "compact"},
                )
                for table in tables
            ]
        )
    finally:
        await admin.close()


async def empty_worker(base: Settings, name: str, workdir: Path) -> Serving:
    """A worker of a group of its own on an empty topic of `PARTITIONS`: its start to serving
    and RSS, stopped after (what a loaded worker is measured against)."""
    kafka = base.kafka_access()
    group = unique(name)
    await changelogs_first(kafka, group, PARTITIONS)
    settings = settings_for(base, name, partitions=PARTITIONS)
    worker = WorkerProcess(
        settings, group, workdir / "empty", instance_id=DEFAULT_MEMBERSHIP, loglevel="warning"
    )
    return await serving_stopped(worker)


async def changelog_ends(
    kafka: KafkaAccess, app_id: str
) -> tuple[list[str], dict[TopicPartition, int]]:
    """The changelogs of group `app_id`'s tables, and the end offset of each partition."""
    changelogs = [f"{app_id}-{table}-changelog" for table in TABLES]
    ends = {
        TopicPartition(topic, partition): end
        for topic in changelogs
        for partition, end in (await end_offsets(kafka, topic, PARTITIONS)).items()
    }
    return changelogs, ends


async def agent_through(worker: WorkerProcess, kafka: KafkaAccess) -> None:
    """Until the worker's agent handled every record of its topic as of now. The store holding
    them all is not that: a worker started on a backlog replicates it by catching up from
    Kafka (agents/replication.py), ahead of its agent, whose tables then held only ~29% of
    1,000,000 journals (and 9,273 of 50,000) when the store held them all."""
    settings = worker.settings
    ends = await end_offsets(kafka, settings.topic, settings.partitions)
    async with aiohttp.ClientSession(headers=client_headers(settings)) as http:
        for partition, end in ends.items():
            if end > 0:
                await worker_at(worker, http, end, partition=partition)


async def bench_scale(
    base: Settings, journals: int, workdir: Path, rate: int = 1000, seconds: float = 30.0
) -> Section:
    settings = settings_for(base, "scale", partitions=PARTITIONS)
    kafka = settings.kafka_access()
    await ensure_topic(kafka, TopicSpec(settings.topic, PARTITIONS))
    bound = client_bound(journals)
    client_idle, client_at = await _client_memory(settings, journals, bound)

    empty = await empty_worker(base, "scale_empty", workdir)
    app_id = unique("scale")
    await changelogs_first(kafka, app_id, PARTITIONS)
    first = WorkerProcess(
        settings, app_id, workdir / "first", instance_id=DEFAULT_MEMBERSHIP, loglevel="warning"
    )
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        started = time.monotonic()
        first.start()
        try:
            await first.wait_ready(timeout_s=1800)
            await settle(settings, store, timeout_s=3600)
            await agent_through(first, kafka)
            indexing_s = time.monotonic() - started
            indexed_kib = first.memory_kib()["VmRSS"]
        finally:
            await asyncio.to_thread(first.stop)
        changelogs, ends = await changelog_ends(kafka, app_id)
        # the same identity (static membership: its id is the host and HTTP port), so that it
        # takes the first worker's place and all its partitions at once
        fresh = WorkerProcess(
            settings,
            app_id,
            workdir / "fresh",
            port=first.port,
            instance_id=DEFAULT_MEMBERSHIP,
            loglevel="warning",
        )
        second = WorkerProcess(
            settings, app_id, workdir / "second", instance_id=DEFAULT_MEMBERSHIP, loglevel="warning"
        )
        try:
            restored = await restore_to_serving(fresh, 0)
            client = await Journals.connect(settings, store=store)
            try:
                pause = await measure_pause(client, store, second, rate, seconds)
            finally:
                await client.close()
        finally:
            await asyncio.gather(asyncio.to_thread(second.stop), asyncio.to_thread(fresh.stop))
    finally:
        await store.close()
    consumer_s = await read_all(kafka, ends)
    per_table = {
        topic: sum(e for tp, e in ends.items() if tp.topic == topic) for topic in changelogs
    }
    restore = section_of(
        journals,
        per_table,
        empty.seconds,
        restored.seconds,
        consumer_s,
        restored.ahead,
        restored.ahead_s,
    )
    measured = Measured(
        journals=journals,
        bound=bound,
        client_idle_kib=client_idle,
        client_kib=client_at,
        empty_worker_s=empty.seconds,
        empty_worker_kib=empty.rss_kib,
        indexed_kib=indexed_kib,
        indexing_s=indexing_s,
        restore=restore,
        restored_kib=restored.rss_kib,
        pause=pause,
    )
    return scale_section(measured, rate, seconds)
