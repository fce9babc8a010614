"""A huge journal streamed over HTTP, and read with the direct client: events/s and the
reader's peak memory growth (the worker's, this process's)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from app.http_tokens import client_headers
from app.progress import Meter
from bench.common import Row, Section, median, spread, unique
from bench.environment import quiet_cassandra
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
    "client (`async for event in journal.read()`), this process's VmRSS sampled the same way. "
    "Baseline (no slowdown with length): a journal of {short:,} events written the same way "
    "beside it, read both ways after a warm-up read, {short_reads} times each just before the "
    "huge journal's reads (medians); Cassandra's compactions and flushes of the writes are let "
    "finish first."
)
# the short journal whose read rates the huge one's are held to: issue 42's recovery journal
SHORT_EVENTS = 20_000
SHORT_READS = 3


# the full run's Appends: the events of one Append are one stored row (schema version 4)
HUGE_APPEND_EVENTS = 1000


async def bench_huge(
    journals: Journals,
    store: CassandraStore,
    worker: WorkerProcess,
    count: int,
    per_append: int = HUGE_APPEND_EVENTS,
) -> Section:
    short_events = min(count, SHORT_EVENTS)  # a quick run's huge journal may be the shorter
    method = METHOD.format(
        events=count, per_append=per_append, short=short_events, short_reads=SHORT_READS
    )
    section = Section("Huge journal over HTTP", method)
    journal_id = unique("huge")
    journal = journals.journal(journal_id)
    short = journals.journal(unique("short"))
    started = time.monotonic()
    await _write(journal, count, per_append)
    written = time.monotonic()
    await _write(short, short_events, per_append)
    s = journals.writer.partitions
    ends = await end_offsets(worker.settings.kafka_access(), journals.topic, s)
    await wait_replicated(store, journals.topic, ends, timeout_s=900)
    replicated = time.monotonic()
    quiet = await quiet_cassandra(store)  # reads timed while ~GBs compact measure compaction
    section.notes.append(
        f"writing took {written - started:.1f} s ({count / (written - started):,.0f} events/s); "
        f"the worker had it and the short journal replicated {replicated - written:.1f} s later; "
        f"Cassandra's compactions and flushes then took {quiet:.0f} s to finish"
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    http = aiohttp.ClientSession(timeout=timeout, headers=client_headers(worker.settings))
    try:
        await _huge_reads(section, http, worker, (journal, count), (short, short_events))
    finally:
        await http.close()
    return section


async def _write(journal: Journal, count: int, per_append: int) -> None:
    meter = Meter(f"journal of {count:,}", count, "events")
    for first in range(1, count + 1, per_append):
        batch = min(per_append, count - first + 1)
        await journal.append(events(first, batch), ack=Ack.KAFKA)
        meter.advance(batch)
    meter.close()


async def _stream(http: aiohttp.ClientSession, url: str) -> int:
    """GET a journal's events as NDJSON: the lines, counted as they come, nothing kept."""
    lines = 0
    async with http.get(url) as response:
        response.raise_for_status()
        async for chunk in response.content.iter_chunked(1 << 16):
            lines += chunk.count(b"\n")
    return lines


async def _rate(read: Callable[[], Awaitable[int]], count: int) -> float:
    started = time.monotonic()
    read_count = await read()
    if read_count != count:
        raise RuntimeError(f"{read_count:,} events read, {count:,} expected")
    return count / (time.monotonic() - started)


async def _direct_count(journal: Journal) -> int:
    read = 0
    async for _ in journal.read():
        read += 1
    return read


async def _huge_reads(
    section: Section,
    http: aiohttp.ClientSession,
    worker: WorkerProcess,
    huge: tuple[Journal, int],
    short_journal: tuple[Journal, int],
) -> None:
    """Reads of the short journal, then of the huge one, over HTTP and direct (`METHOD`)."""
    journal, count = huge
    short, short_events = short_journal
    short_url = f"{worker.url}/journals/{short.key.id}/events"
    short_rates: dict[str, list[float]] = {"http": [], "direct": []}
    for n in range(SHORT_READS + 1):  # the first, a warm-up
        http_rate = await _rate(lambda: _stream(http, short_url), short_events)
        direct_rate = await _rate(lambda: _direct_count(short), short_events)
        if n:
            short_rates["http"].append(http_rate)
            short_rates["direct"].append(direct_rate)
    short_http, short_direct = median(short_rates["http"]), median(short_rates["direct"])
    before = worker.memory_kib()
    peak = before["VmRSS"]
    streaming = True

    async def sample() -> None:
        nonlocal peak
        while streaming:
            peak = max(peak, worker.memory_kib()["VmRSS"])
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    stream_started = time.monotonic()
    try:
        lines = await _stream(http, f"{worker.url}/journals/{journal.key.id}/events")
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
        Row(
            "stream: events/s",
            rate,
            "events/s",
            short_http,
            _SAME_RATE,
            rate >= 0.9 * short_http,
            note=f"{lines:,} events, {seconds:.1f} s",
        )
    )
    section.add(
        Row(
            f"stream of a {short_events:,}-event journal: events/s",
            short_http,
            "events/s",
            spread=spread(short_rates["http"]),
        )
    )
    section.add(
        Row("worker peak RSS growth", growth_mb, "MB", goal="<= 50 MB", met=growth_mb <= 50)
    )
    section.notes.append(
        f"worker VmRSS before {before['VmRSS'] / 1024:.0f} MB, peak {peak / 1024:.0f} MB, "
        f"after {after['VmRSS'] / 1024:.0f} MB; VmHWM before {before['VmHWM'] / 1024:.0f} MB, "
        f"after {after['VmHWM'] / 1024:.0f} MB"
    )
    await _direct_read(journal, count, section, short_direct)
    section.add(
        Row(
            f"direct read of a {short_events:,}-event journal: events/s",
            short_direct,
            "events/s",
            spread=spread(short_rates["direct"]),
        )
    )


# "a 1,000,000-event journal at the same rate (no slowdown with length)" (issue 42), within
# the noise of a single read on a shared host
_SAME_RATE = ">= 0.9x the short journal's"


async def _direct_read(journal: Journal, count: int, section: Section, short: float) -> None:
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
    section.add(
        Row(
            "direct read: events/s",
            read / seconds,
            "events/s",
            short,
            _SAME_RATE,
            read / seconds >= 0.9 * short,
            note=f"{read:,} events",
        )
    )
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
