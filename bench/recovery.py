"""Recovery of one long replicated journal: reading it from seqNr 1 to its end with the direct
client and over HTTP, each against a raw read of the same rows."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from app.http_tokens import client_headers
from bench.common import Row, Section, median, spread, unique
from bench.profile import process_cpu_s
from bench.raw_read_http import RawReads, raw_read_server
from bench.workload import http_body
from devtools.workers import WorkerProcess, free_port
from journal import Journals

METHOD = (
    "One journal of {events:,} events (appends of {per_append} events of ~300 bytes, "
    "`bench/workload.py`'s, POSTed to the worker one after the other), replicated by the worker"
    " (the pointers reach the topic's end) before anything is timed. A read takes it from seqNr"
    " 1 to its end, every event consumed; events/s of each read. Direct: `journal.read()` with "
    "the direct client (`async for event in ...`), and its `read_batches()` (a list of events "
    "at a time), against a raw read: the store's read statement (`Statements.read_records`, "
    "fetch size as the store's) on a driver session of its own, paged, each row's value (an "
    "Append's events) decoded with orjson (`bench/raw_read_http.py`). HTTP: GET "
    "/journals/{{id}}/events on the worker (lines counted), against a minimal aiohttp server "
    "process on uvloop that pages the same statement and writes one NDJSON line per event (one "
    "`orjson.dumps`) and one write per page (`bench/raw_read_http.py`). One warm-up read of "
    "each, then {reps} repetitions, the five reads interleaved in an order rotated every "
    "repetition; "
    "medians (spread min..max). CPU: the serving process's (user + system, every thread) over "
    "its reads, per event."
)

MODES = ("raw", "direct", "batches", "http_raw", "http")
BASELINES = {"direct": "raw", "batches": "raw", "http": "http_raw"}
GOALS = {"direct": (0.8, ">= 0.8x raw"), "http": (0.6, ">= 0.6x raw HTTP")}
LABELS = {
    "raw": "raw read (SELECT pages, payloads decoded)",
    "direct": "direct client",
    "batches": "direct client, read_batches()",
    "http_raw": "raw HTTP read server",
    "http": "HTTP (worker)",
}


@dataclass(frozen=True, slots=True)
class RecoverySizes:
    events: int
    repetitions: int
    per_append: int = 10


async def _write(http: aiohttp.ClientSession, url: str, sizes: RecoverySizes) -> None:
    for first in range(1, sizes.events + 1, sizes.per_append):
        count = min(sizes.per_append, sizes.events - first + 1)
        async with http.post(url, json=http_body(first, count)) as response:
            if response.status != 200:
                raise RuntimeError(f"append: {response.status} {await response.text()}")


async def bench_recovery(
    journals: Journals,
    worker: WorkerProcess,
    settle: Callable[[], Awaitable[None]],
    sizes: RecoverySizes,
) -> Section:
    """`journals` on the topic and keyspace `worker` serves; `settle` returns once the worker
    has replicated everything appended so far."""
    settings = worker.settings
    if sizes.events >= settings.segment_size:
        raise ValueError("the raw reads read one segment: the journal must fit in it")
    section = Section(
        "Recovery",
        METHOD.format(events=sizes.events, per_append=sizes.per_append, reps=sizes.repetitions),
    )
    journal_id = unique("recovery")
    path = f"/journals/{journal_id}/events"
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    port = free_port()
    raw = await RawReads.connect(settings)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, headers=client_headers(settings)) as http,
            raw_read_server(settings, port) as raw_pid,
        ):
            started = time.monotonic()
            await _write(http, f"{worker.url}{path}", sizes)
            written = time.monotonic()
            await settle()
            section.notes.append(
                f"writing took {written - started:.1f} s; the worker had it all replicated "
                f"{time.monotonic() - written:.1f} s later"
            )

            async def raw_read() -> int:
                count = 0
                async for page in raw.pages(settings.topic, journal_id):
                    count += len(page)
                return count

            async def direct_read() -> int:
                count = 0
                async for _ in journals.journal(journal_id).read():
                    count += 1
                return count

            async def batches_read() -> int:
                count = 0
                async for batch in journals.journal(journal_id).read_batches():
                    for _ in batch:  # every event taken, as `direct_read` takes them
                        count += 1
                return count

            async def http_read(base: str) -> int:
                lines = 0
                async with http.get(f"{base}{path}") as response:
                    response.raise_for_status()
                    async for chunk in response.content.iter_chunked(1 << 16):
                        lines += chunk.count(b"\n")
                return lines

            reads: dict[str, Callable[[], Awaitable[int]]] = {
                "raw": raw_read,
                "direct": direct_read,
                "batches": batches_read,
                "http_raw": lambda: http_read(f"http://127.0.0.1:{port}"),
                "http": lambda: http_read(str(worker.url)),
            }
            servers = {"raw": os.getpid(), "direct": os.getpid(), "batches": os.getpid()}
            servers["http_raw"] = raw_pid
            servers["http"] = worker.pid
            rates: dict[str, list[float]] = {mode: [] for mode in MODES}
            cpu_s = dict.fromkeys(MODES, 0.0)
            for mode in MODES:  # warm-up
                await reads[mode]()
            for repetition in range(sizes.repetitions):
                shift = repetition % len(MODES)
                for mode in MODES[shift:] + MODES[:shift]:
                    cpu_before = process_cpu_s(servers[mode])
                    read_started = time.perf_counter()
                    count = await reads[mode]()
                    seconds = time.perf_counter() - read_started
                    cpu_s[mode] += process_cpu_s(servers[mode]) - cpu_before
                    if count != sizes.events:
                        raise RuntimeError(f"{mode} read {count} events of {sizes.events}")
                    rates[mode].append(count / seconds)
    finally:
        await raw.close()
    _rows(section, rates, cpu_s, sizes)
    return section


_CPU_OF = {
    "raw": "this process's",
    "direct": "this process's (the direct client's)",
    "batches": "this process's (the direct client's)",
    "http_raw": "the raw HTTP server's",
    "http": "the worker's",
}


def _rows(
    section: Section, rates: dict[str, list[float]], cpu_s: dict[str, float], sizes: RecoverySizes
) -> None:
    medians = {mode: median(values) for mode, values in rates.items()}
    for mode in MODES:
        label = LABELS[mode]
        section.throughputs[label] = medians[mode]
        base = BASELINES.get(mode)
        baseline = None if base is None else medians[base]
        ratio, goal = GOALS.get(mode, (0.0, ""))
        section.add(
            Row(
                f"{label}: events/s",
                medians[mode],
                "events/s",
                baseline,
                goal,
                None if baseline is None else medians[mode] >= ratio * baseline,
                spread(rates[mode]),
                f"{sizes.events:,} events a read",
            )
        )
    for mode in MODES:
        events = sizes.events * sizes.repetitions
        section.add(
            Row(
                f"{LABELS[mode]}: CPU",
                cpu_s[mode] / events * 1e6,
                "us/event",
                note=f"{_CPU_OF[mode]} CPU time (user + system, every thread) over its reads",
            )
        )
