"""Growing the topic online (issue 40, docs/growing.md): what a move costs the writers, and
what moving a large partition costs.

Two parts, one run:
- **Appends during a move**: verified appends through the direct client, each writer the only
  writer of its journal, first with no move, then while `kafka-journal topic grow` takes the
  topic from 3 to 6 partitions in the same process. Appends/s and p99 of each window; per
  journal, its unavailability: the longest an append of it took in the move's window (a
  503 `JournalMoving` retried counts in that append's time), p50 and max over the journals.
- **A large partition**: a one-partition topic holding `journals` journals of ten one-event
  Appends each, replicated by a worker; then the grow to 2 partitions with the worker running:
  the command's seconds (less its wait of three leases before the first Seal, which does not
  grow with anything), the worker's CPU seconds and memory over the move, and a fresh direct
  client's first reads of moved journals (each takes its base from OLD's store row).
A move copies no events: only a Seal per old partition is written, so its time should not grow
with what the partition holds.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.grow import grow_topic
from bench.common import Row, Section, percentile, timed, unique
from bench.environment import connected, settings_for, settle, worker
from bench.restore import fill_first_appends
from devtools.workers import WorkerProcess
from journal import Journals
from journal.core import SEAL_AFTER_LEASES, Event, Phase, TextPayload
from journal.errors import OutcomeUnknown, Unavailable
from journal.settings import Settings
from journal.store import CassandraStore

WRITERS = 48  # journals written concurrently, one writer each (16 per old partition)
BEFORE_S = 10.0  # the window with no move
RETRIES = 50  # a 503 while a journal moves is retried at once, this many times at most


@dataclass(frozen=True, slots=True)
class Appended:
    """One acknowledged append: its journal, when it was asked and when it was answered
    (monotonic seconds), and how many 503s it retried."""

    journal: str
    started: float
    ended: float
    retried: int = 0

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000


def window(appends: Sequence[Appended], start: float, end: float) -> list[Appended]:
    """The appends asked within [start, end)."""
    return [a for a in appends if start <= a.started < end]


def per_second(appends: Sequence[Appended], seconds: float) -> float:
    return len(appends) / seconds if seconds > 0 else float("nan")


def unavailability_ms(appends: Sequence[Appended]) -> dict[str, float]:
    """Per journal, the longest of its appends (ms): how long a writer of it waited at most."""
    longest: dict[str, float] = {}
    for append in appends:
        longest[append.journal] = max(longest.get(append.journal, 0.0), append.ms)
    return longest


async def bench_grow(base: Settings, journals: int, workdir: Path) -> Section:
    section = Section("Growing the topic online", METHOD.format(journals=journals))
    await _appends_during_a_move(base, workdir, section)
    await _a_large_partition(base, journals, workdir, section)
    return section


METHOD = (
    "Appends during a move: a fresh 3-partition topic replicated by a worker; "
    f"{WRITERS} writers, each the only writer of its journal, append one event at a time "
    f"(verified, through the direct client), {BEFORE_S:.0f} s with no move, then while "
    "`topic grow --partitions 6 ` runs in the same process, until it is done; a "
    "503 is retried at once (its time counts in the append's). "
    "A large partition: a fresh 1-partition topic with {journals:,} journals of ten one-event "
    "Appends each, replicated by a worker; then `topic grow --partitions 2 ` with "
    f"the worker running: the command's time less its wait of {SEAL_AFTER_LEASES} leases "
    "before the first Seal; the worker's CPU seconds (/proc/<pid>/stat) and VmRSS across the "
    "command; a fresh direct client's first reads of 200 moved journals (their base from "
    "OLD's row); then as many other journals' Appends produced into NEW and replicated by the "
    "worker's loop for grown topics: records/s from the first produce until the store holds "
    "them, against the same for OLD (produced, then replicated by the worker's agent)."
)


async def _appends_during_a_move(base: Settings, workdir: Path, section: Section) -> None:
    settings = settings_for(base, "grow", partitions=3)
    appended: list[Appended] = []
    stop = asyncio.Event()
    replicating = worker(settings, workdir / "grow")  # replicates OLD, as in a deployment
    replicating.start()
    try:
        await replicating.wait_ready()
        await _appends_through_the_move(settings, appended, stop, section)
    finally:
        replicating.stop()


async def _appends_through_the_move(
    settings: Settings, appended: list[Appended], stop: asyncio.Event, section: Section
) -> None:
    async with connected(settings) as (journals, store):

        async def writer(journal_id: str) -> None:
            seq_nr = 0
            while not stop.is_set():
                seq_nr += 1
                text = f"{journal_id}:{seq_nr}"
                journal = journals.journal(journal_id)
                call = functools.partial(
                    journal.append, [Event(seq_nr, payload=TextPayload(text))], idempotency_key=text
                )
                appended.append(await _retried(journal_id, call))

        tasks = [asyncio.create_task(writer(f"w{n}")) for n in range(WRITERS)]
        try:
            await asyncio.sleep(1.0)  # warm: each writer's first append (a first read)
            quiet_start = time.monotonic()
            await asyncio.sleep(BEFORE_S)
            move_start = time.monotonic()
            grow = await grow_topic(settings, store, 6, yes=True, say=_quiet)
            move_end = time.monotonic()
            assert grow is not None and grow.phase is Phase.DONE
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    quiet = window(appended, quiet_start, move_start)
    moving = window(appended, move_start, move_end)
    for label, part, seconds in (
        ("no move", quiet, move_start - quiet_start),
        ("during the move", moving, move_end - move_start),
    ):
        section.samples[f"appends, {label}"] = [a.ms for a in part]
        section.throughputs[f"appends, {label}"] = per_second(part, seconds)
    rate = per_second(moving, move_end - move_start)
    quiet_rate = per_second(quiet, move_start - quiet_start)
    section.add(Row("appends/s during a move", rate, "/s", baseline=quiet_rate))
    p99, quiet_p99 = percentile([a.ms for a in moving], 99), percentile([a.ms for a in quiet], 99)
    section.add(Row("append p99 during a move", p99, "ms", baseline=quiet_p99))
    waits = sorted(unavailability_ms(moving).values())
    section.add(Row("a moving journal's unavailability, p50", percentile(waits, 50), "ms"))
    section.add(Row("a moving journal's unavailability, max", max(waits), "ms"))
    retried = sum(a.retried for a in moving)
    section.notes.append(
        f"the move took {move_end - move_start:.1f} s (of which {SEAL_AFTER_LEASES} leases, "
        f"{SEAL_AFTER_LEASES * settings.grow_lease_s:.0f} s, waited before the first Seal); "
        f"{len(moving)} appends during it, {retried} 503s retried"
    )


async def _retried(journal_id: str, call: Callable[[], Awaitable[object]]) -> Appended:
    started = time.monotonic()
    for attempt in range(RETRIES):
        try:
            await call()
            return Appended(journal_id, started, time.monotonic(), attempt)
        except (OutcomeUnknown, Unavailable):  # moving, or the outcome unknown: same key again
            continue
    raise AssertionError(f"{journal_id}: still unavailable after {RETRIES} tries")


async def _a_large_partition(
    base: Settings, journals: int, workdir: Path, section: Section
) -> None:
    settings = settings_for(base, "growbig", partitions=1)
    worker = WorkerProcess(settings, unique("growbig"), workdir / "growbig", loglevel="warning")
    worker.start()
    try:
        await worker.wait_ready()
        filling = time.monotonic()
        await fill_first_appends(
            settings.kafka_access(), settings.topic, journals, settings.partitions, appends=10
        )
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            await settle(settings, store, timeout_s=3600)
            old_s = time.monotonic() - filling
            cpu_before, rss_before = cpu_seconds(worker.pid), worker.memory_kib()["VmRSS"]
            started = time.monotonic()
            grow = await grow_topic(settings, store, 2, yes=True, say=_quiet)
            took = time.monotonic() - started - SEAL_AFTER_LEASES * settings.grow_lease_s
            assert grow is not None and grow.phase is Phase.DONE
            cpu_after, rss_after = cpu_seconds(worker.pid), worker.memory_kib()["VmRSS"]
            async with connected(settings) as (client, _):
                ids = [f"j-{n}" for n in range(0, journals, max(1, journals // 200))]
                reads = [await timed(functools.partial(_read_one, client, i)) for i in ids]
            # the grown topic's replication (the worker's successor loop), the same backlog
            # of other journals in NEW, filled and replicated as OLD's was by the agent
            grown = settings.model_copy(update={"topic": grow.new_topic, "partitions": 2})
            filling = time.monotonic()
            await fill_first_appends(grown.kafka_access(), grown.topic, journals, 2, journals, 10)
            await settle(grown, store, timeout_s=3600)
            new_s = time.monotonic() - filling
        finally:
            await store.close()
    finally:
        worker.stop()
    note = f"{journals:,} journals, {journals * 10:,} records"
    old_rate, new_rate = journals * 10 / old_s, journals * 10 / new_s
    section.add(Row("filled and replicated: the agent (OLD)", old_rate, "records/s", note=note))
    section.add(
        Row(
            "filled and replicated: the grown topic's loop (NEW)",
            new_rate,
            "records/s",
            note=f"{new_rate / old_rate:.2f}x the agent's, same run",
        )
    )
    section.add(Row("moving a partition: the command", took, "s", note=note))
    section.add(Row("moving a partition: the worker's CPU", cpu_after - cpu_before, "s"))
    section.add(
        Row("moving a partition: the worker's memory", (rss_after - rss_before) / 1024, "MiB")
    )
    section.add(Row("a moved journal's first read, p50", percentile(reads, 50), "ms"))
    section.samples["a moved journal's first read"] = reads


def _quiet(line: str) -> None:
    """The command's lines are not the bench's output."""


async def _read_one(client: Journals, journal_id: str) -> None:
    events = [record async for record in client.journal(journal_id).read()]
    assert len(events) == 10, (journal_id, len(events))


def cpu_seconds(pid: int) -> float:
    """The user and system CPU seconds a process used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
