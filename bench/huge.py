"""A huge journal streamed over HTTP, and read with the direct client: events/s and the
reader's peak memory growth (the worker's, this process's)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp

from app.http_tokens import client_headers
from app.progress import Meter
from bench.common import Row, Section, unique
from bench.workload import events
from devtools.workers import WorkerProcess
from journal import Ack, Journal, Journals
from journal.kafka import end_offsets
from journal.replication import wait_replicated
from journal.store import CassandraStore

METHOD = (
    "One journal of {events:,} events (~300 bytes each) written in appends of {per_append:,} "
    "events with the direct client (one after the other), replicated by the worker; then "
    "GET /journals/{{id}}/events "
    "streamed through aiohttp (lines counted, nothing kept). The worker's VmRSS is sampled "
    "from /proc/<pid>/status every 50 ms during the stream; growth = peak VmRSS - VmRSS before "
    "the request (VmHWM before/after in the notes). Then the same journal read with the direct "
    "client (`async for event in journal.read()`), this process's VmRSS sampled the same way."
)


# the full run's Appends: the events of one Append are one stored row (schema version 4)
HUGE_APPEND_EVENTS = 1000


async def bench_huge(
    journals: Journals,
    store: CassandraStore,
    worker: WorkerProcess,
    count: int,
    per_append: int = HUGE_APPEND_EVENTS,
) -> Section:
    section = Section("Huge journal over HTTP", METHOD.format(events=count, per_append=per_append))
    journal_id = unique("huge")
    journal = journals.journal(journal_id)
    started = time.monotonic()
    meter = Meter("huge journal", count, "events")
    for first in range(1, count + 1, per_append):
        batch = min(per_append, count - first + 1)
        await journal.append(events(first, batch), ack=Ack.KAFKA)
        meter.advance(batch)
    meter.close()
    written = time.monotonic()
    s = journals.writer.partitions
    ends = await end_offsets(worker.settings.kafka_access(), journals.topic, s)
    await wait_replicated(store, journals.topic, ends, timeout_s=900)
    replicated = time.monotonic()
    section.notes.append(
        f"writing took {written - started:.1f} s ({count / (written - started):,.0f} events/s); "
        f"the worker had it replicated {replicated - written:.1f} s later"
    )
    before = worker.memory_kib()
    peak = before["VmRSS"]
    streaming = True

    async def sample() -> None:
        nonlocal peak
        while streaming:
            peak = max(peak, worker.memory_kib()["VmRSS"])
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    lines = 0
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    stream_started = time.monotonic()
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, headers=client_headers(worker.settings)) as http,
            http.get(f"{worker.url}/journals/{journal_id}/events") as response,
        ):
            response.raise_for_status()
            async for chunk in response.content.iter_chunked(1 << 16):
                lines += chunk.count(b"\n")
    finally:
        streaming = False
        await sampler
    seconds = time.monotonic() - stream_started
    after = worker.memory_kib()
    if lines != count:
        section.notes.append(f"WARNING: {lines:,} lines streamed, {count:,} expected")
    rate = lines / seconds
    growth_mb = (peak - before["VmRSS"]) / 1024
    section.throughputs["HTTP stream"] = rate
    section.add(
        Row("stream: events/s", rate, "events/s", note=f"{lines:,} events, {seconds:.1f} s")
    )
    section.add(
        Row("worker peak RSS growth", growth_mb, "MB", goal="<= 50 MB", met=growth_mb <= 50)
    )
    section.notes.append(
        f"worker VmRSS before {before['VmRSS'] / 1024:.0f} MB, peak {peak / 1024:.0f} MB, "
        f"after {after['VmRSS'] / 1024:.0f} MB; VmHWM before {before['VmHWM'] / 1024:.0f} MB, "
        f"after {after['VmHWM'] / 1024:.0f} MB"
    )
    await _direct_read(journal, count, section)
    return section


async def _direct_read(journal: Journal, count: int, section: Section) -> None:
    """The same journal read with the direct client (`async for event in journal.read()`):
    events/s, and this process's peak VmRSS growth over the read (sampled every 50 ms)."""
    before = own_rss_kib()
    peak = before
    reading = True

    async def sample() -> None:
        nonlocal peak
        while reading:
            peak = max(peak, own_rss_kib())
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    read = 0
    started = time.monotonic()
    try:
        async for _ in journal.read():
            read += 1
    finally:
        reading = False
        await sampler
    seconds = time.monotonic() - started
    if read != count:
        section.notes.append(f"WARNING: {read:,} events read directly, {count:,} expected")
    section.throughputs["direct read"] = read / seconds
    section.add(Row("direct read: events/s", read / seconds, "events/s", note=f"{read:,} events"))
    growth_mb = (peak - before) / 1024
    section.add(
        Row(
            "direct reader's peak RSS growth", growth_mb, "MB", goal="<= 50 MB", met=growth_mb <= 50
        )
    )


def own_rss_kib() -> int:
    """This process's VmRSS, in KiB (/proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")
