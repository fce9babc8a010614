"""A huge journal streamed over HTTP: events/s and the worker's peak memory growth."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from app.http_tokens import client_headers
from app.progress import Meter
from bench.common import Row, Section, unique
from bench.workload import events
from devtools.workers import WorkerProcess
from journal import Ack, Journals
from journal.kafka import end_offsets
from journal.replication import wait_replicated
from journal.store import CassandraStore

METHOD = (
    "One journal of {events:,} events (~300 bytes each) written in appends of 1,000 events "
    "with the direct client, replicated by the worker; then GET /journals/{{id}}/events "
    "streamed through aiohttp (lines counted, nothing kept). The worker's VmRSS is sampled "
    "from /proc/<pid>/status every 50 ms during the stream; growth = peak VmRSS - VmRSS before "
    "the request (VmHWM before/after in the notes)."
)


async def bench_huge(
    journals: Journals, store: CassandraStore, worker: WorkerProcess, count: int
) -> Section:
    section = Section("Huge journal over HTTP", METHOD.format(events=count))
    journal_id = unique("huge")
    journal = journals.journal(journal_id)
    started = time.monotonic()
    meter = Meter("huge journal", count, "events")
    for first in range(1, count + 1, 1000):
        batch = min(1000, count - first + 1)
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
    return section
