"""TLS against the same without (issue 45): appends (direct and HTTP) and a recovery.

Two secured stacks in one run: the one the environment names, with TLS (KJ_TLS=true), and a
plain twin beside it (SASL_PLAINTEXT, Cassandra in clear; data dir `<dir>-plain`, every port +
100), each with a worker of its own (HTTPS on the TLS one). The modes alternate, plain then TLS,
every repetition, so a load on the shared machine falls on both.

Direct appends are timed before the workers start: on this machine a side's replication shares
the two cores with its client, so its cost (over TLS, the worker's and Cassandra's) would be
counted twice, once in the appends and once in the replication row, which times it alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from app.http_tokens import client_headers
from bench.common import Row, Section, median, spread, unique
from bench.environment import quiet_cassandra
from bench.profile import process_cpu_s
from bench.replication import replicate_with_worker, write_backlog
from bench.workload import closed_loop, events, http_body
from devtools.workers import WorkerProcess
from journal import Ack, Journals
from journal.kafka import end_offsets
from journal.replication import wait_replicated
from journal.settings import Settings
from journal.store import CassandraStore
from kjconfig.access import cassandra_admin
from stack import Stack, StackSettings
from stack.tls import StackCertificates

METHOD = (
    "Two secured local stacks at once, one with TLS (Kafka SASL_SSL, Cassandra client "
    "encryption, the worker on HTTPS; every client verifying certificate and name) and one "
    "without (SASL_PLAINTEXT), each with one worker. Appends: {concurrency} lanes, 1 event per "
    "append, each lane its own journal, {appends} direct and {http_appends} HTTP appends per "
    "repetition, {reps} repetitions after {warmups} untimed ones, plain and TLS alternating; "
    "the direct client answered at Kafka's acknowledgement (`Ack.KAFKA`), timed before the "
    "workers start (their replication is timed on its own below), HTTP with `?ack=kafka` once "
    "every side's worker has caught up; the median over repetitions. "
    "CPU per append: the CPU time (user + system, every thread) over the timed repetitions of "
    "this process (the client), the side's Kafka and Cassandra JVMs and its worker (once "
    "started; its replication of the appends runs meanwhile), summed, over the appends: a "
    "measure held to no goal, since it also counts each server's background work, which a "
    "lower rate spreads over fewer appends. "
    "Replication: {reps} backlogs per side, plain and TLS alternating: the side's worker, "
    "caught up, is stopped, {backlog:,} events are written (appends of 10, 100 journals), the "
    "worker is started again and the backlog's records left at its readiness are timed until "
    "every pointer reaches the end (from the process start if most were replicated before it "
    "was ready: noted); the median. Recovery: one journal of {events:,} events (appended 100 "
    "at a time), replicated (every worker idle), then read whole by the direct client, "
    "{reads} times, the sides alternating; the median. Before the HTTP appends, the "
    "replication and the recovery, the run waits until neither Cassandra compacts or flushes "
    "(what one phase leaves compacting falls on the next one's cores)."
)


GOAL = ">= 0.8x"  # issue 45: each measure with TLS at least 0.8x the same without


@dataclass(frozen=True, slots=True)
class TlsSizes:
    appends: int = 1280  # direct appends per repetition, over the lanes
    http_appends: int = 1280  # HTTP ones: over HTTP an append costs ~15x the CPU of a direct one
    concurrency: int = 64
    repetitions: int = 5
    warmups: int = 2  # untimed repetitions first: the stacks may have just started
    events: int = 20_000  # the recovered journal's
    backlog: int = 100_000  # the replicated backlog's events: 20,000 replicate in ~1 s
    reads: int = 9  # a 20,000-event read lasts ~0.15 s: more of them for a steady median


def plain_twin(tls: StackSettings) -> StackSettings:
    """The TLS stack's twin without TLS: `<dir>-plain`, every port + 100."""
    return tls.replace(
        tls="off",
        data_dir=tls.data_dir.with_name(f"{tls.data_dir.name}-plain"),
        kafka_port=tls.kafka_port + 100,
        kafka_controller_port=tls.kafka_controller_port + 100,
        cassandra_native_port=tls.cassandra_native_port + 100,
        cassandra_storage_port=tls.cassandra_storage_port + 100,
        external_kafka=False,
        external_cassandra=False,
    )


def client_settings(stack: StackSettings) -> Settings:
    """The client principal on `stack`'s provisioned journal (topic and keyspace `journal`)."""
    tls = stack.tls == "on"
    return Settings(
        security="on",
        tls=stack.tls,
        kafka_bootstrap=stack.kafka_bootstrap,
        cassandra_hosts=",".join(stack.cassandra_hosts),
        cassandra_port=stack.cassandra_port,
        kafka_ssl_cafile=stack.tls_ca if tls else None,
        cassandra_ssl_cafile=stack.tls_ca if tls else None,
    )


def worker_env(stack: StackSettings) -> dict[str, str]:
    if stack.tls == "off":
        return {}
    return {
        "KJ_HTTP_SSL_CERTFILE": str(StackCertificates(stack.tls_dir).server),
        "KJ_HTTP_SSL_CAFILE": str(stack.tls_ca),
    }


@dataclass
class _Side:
    label: str
    settings: Settings
    journals: Journals
    worker: WorkerProcess
    http: aiohttp.ClientSession
    servers: dict[str, int]  # the side's server JVMs (started here, not external): name -> pid

    def cpu_s(self) -> dict[str, float]:
        """The CPU seconds used so far by the client (this process), the servers, the worker
        (once started)."""
        pids = {"client": os.getpid()} | self.servers
        if self.worker.process is not None and self.worker.process.poll() is None:
            pids["worker"] = self.worker.pid
        return {name: process_cpu_s(pid) for name, pid in pids.items()}


async def bench_tls(
    stacks: dict[str, Stack], workdir: Path, sizes: TlsSizes = TlsSizes()
) -> Section:
    section = Section(
        "TLS",
        METHOD.format(
            concurrency=sizes.concurrency,
            appends=sizes.appends,
            http_appends=sizes.http_appends,
            backlog=sizes.backlog,
            reps=sizes.repetitions,
            warmups=sizes.warmups,
            events=sizes.events,
            reads=sizes.reads,
        ),
    )
    sides: dict[str, _Side] = {}
    try:
        for label, servers in stacks.items():
            stack = servers.settings
            settings = client_settings(stack)
            worker = WorkerProcess(
                settings, "kafka-journal", workdir / label / "worker", env=worker_env(stack)
            )
            journals = await Journals.connect(settings)
            http = aiohttp.ClientSession(
                headers=client_headers(settings),
                connector=aiohttp.TCPConnector(limit=sizes.concurrency, ssl=worker.http_ssl()),
            )
            pids = {"kafka": servers.kafka.pid(), "cassandra": servers.cassandra.pid()}
            running = {name: pid for name, pid in pids.items() if pid is not None}
            sides[label] = _Side(label, settings, journals, worker, http, running)
        await _appends(section, sides, sizes, "direct")
        for side in sides.values():
            side.worker.start()
        for side in sides.values():
            await side.worker.wait_ready()
            await _caught_up(side)
        await _quiet(section, sides, "HTTP appends")
        await _appends(section, sides, sizes, "http")
        await _quiet(section, sides, "replication")
        await _replication(section, sides, sizes)
        await _recovery(section, sides, sizes)
    finally:
        for side in sides.values():
            await side.http.close()
            await side.journals.close()
            side.worker.stop()
    return section


def _direct(side: _Side, prefix: str) -> Callable[[int, int], Awaitable[None]]:
    async def op(lane: int, round_: int) -> None:
        batch = events(round_ + 1, 1)
        await side.journals.journal(f"{prefix}-{lane}").append(batch, ack=Ack.KAFKA)

    return op


def _http(side: _Side, prefix: str) -> Callable[[int, int], Awaitable[None]]:
    async def op(lane: int, round_: int) -> None:
        url = f"{side.worker.url}/journals/{prefix}-{lane}/events?ack=kafka"
        async with side.http.post(url, json=http_body(round_ + 1, 1)) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP append: {response.status} {await response.text()}")
            await response.read()

    return op


async def _appends(section: Section, sides: dict[str, _Side], sizes: TlsSizes, kind: str) -> None:
    """`kind` ("direct" or "http") appends, the sides alternating every repetition."""
    make = _direct if kind == "direct" else _http
    rates: dict[str, list[float]] = {}
    cpu: dict[str, dict[str, float]] = {}  # CPU seconds over the timed repetitions
    counts: dict[str, int] = {}
    for repetition in range(sizes.warmups + sizes.repetitions):
        for label, side in sides.items():
            operation = make(side, unique(f"{kind}{repetition}"))
            before = side.cpu_s()
            count = sizes.appends if kind == "direct" else sizes.http_appends
            timed = await closed_loop(operation, sizes.concurrency, count)
            after = side.cpu_s()
            if repetition >= sizes.warmups:
                rates.setdefault(label, []).append(timed.per_second)
                used = cpu.setdefault(label, {})
                for name, seconds in after.items():
                    used[name] = used.get(name, 0.0) + seconds - before[name]
                counts[label] = counts.get(label, 0) + len(timed.latencies_ms)
    _against_plain(section, f"{kind} appends, c={sizes.concurrency}", rates, "appends/s")
    per_append = {
        label: {name: 1e6 * s / counts[label] for name, s in cpu[label].items()}
        for label in ("plain", "tls")
    }
    total = {label: sum(per_append[label].values()) for label in per_append}
    # a measure, not a goal: CPU per append also counts each server's background work,
    # which a lower rate spreads over fewer appends (BENCHMARKS.md, the quiet-host runs)
    name = f"{kind} appends, CPU per append"
    section.add(Row(f"{name}, plain", total["plain"], "us"))
    section.add(Row(f"{name}, TLS", total["tls"], "us", baseline=total["plain"]))
    for label, parts in per_append.items():
        split = ", ".join(f"{part} {us:.0f}" for part, us in parts.items())
        section.notes.append(f"{kind} appends, CPU per append, {label} (us): {split}")


async def _caught_up(side: _Side) -> None:
    """Until the side's worker has replicated everything written so far (bounded)."""
    settings = side.settings
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await wait_replicated(side.journals.store, settings.topic, ends, timeout_s=600)


async def _replication(section: Section, sides: dict[str, _Side], sizes: TlsSizes) -> None:
    """The worker's rate over a backlog, `repetitions` times per side, the sides alternating:
    one measurement a run swung 0.62-1.20x (BENCHMARKS.md, issue 45)."""
    rates: dict[str, list[float]] = {}
    for _ in range(sizes.repetitions):
        for label, side in sides.items():
            settings = side.settings
            kafka = settings.kafka_access()
            ends = await end_offsets(kafka, settings.topic, settings.partitions)
            # caught up first: the backlog is only what is written while the worker is stopped
            await wait_replicated(side.journals.store, settings.topic, ends, timeout_s=600)
            side.worker.stop()
            await write_backlog(side.journals, sizes.backlog)
            notes = Section("", "")
            rate = await replicate_with_worker(
                settings, side.worker, side.journals.store, notes, backlog_from=ends
            )
            section.notes += [f"replication, {label}: {note}" for note in notes.notes]
            rates.setdefault(label, []).append(rate)
    _against_plain(
        section,
        f"replication of {sizes.backlog:,}",
        rates,
        "events/s",
        note="the worker's agent over a backlog, from its readiness",
    )


async def _recovery(section: Section, sides: dict[str, _Side], sizes: TlsSizes) -> None:
    reads: dict[str, list[float]] = {}
    ids = {label: unique("recovery") for label in sides}
    for label, side in sides.items():
        journal = side.journals.journal(ids[label])
        for first in range(1, sizes.events + 1, 100):
            await journal.append(events(first, min(100, sizes.events - first + 1)), ack=Ack.KAFKA)
        await _replicated(side, ids[label], sizes.events)
    for side in sides.values():
        await _caught_up(side)  # the reads share the cores with no replication
    # nor with a compaction of the backlogs above, on one side or the other: the reads' ratio
    # swung 0.44-0.90x with it, and was 1.00-1.05x with both Cassandras quiet
    await _quiet(section, sides, "recovery")
    for _ in range(sizes.reads):
        for label, side in sides.items():
            started = time.perf_counter()
            count = 0
            async for _record in side.journals.journal(ids[label]).read():
                count += 1
            assert count == sizes.events, f"{label}: read {count} of {sizes.events}"
            reads.setdefault(label, []).append(sizes.events / (time.perf_counter() - started))
    _against_plain(section, f"recovery of {sizes.events:,}, direct", reads, "events/s")


def _against_plain(
    section: Section, name: str, samples: dict[str, list[float]], unit: str, note: str = ""
) -> None:
    """The plain row and the TLS row held to the issue's goal against it (medians)."""
    plain = median(samples["plain"])
    section.add(Row(f"{name}, plain", plain, unit, spread=spread(samples["plain"])))
    tls = samples["tls"]
    section.add(
        Row(
            f"{name}, TLS",
            median(tls),
            unit,
            baseline=plain,
            goal=GOAL,
            spread=spread(tls),
            note=note,
        )
    )


async def _quiet(section: Section, sides: dict[str, _Side], before: str) -> None:
    """Until neither side's Cassandra compacts or flushes (the system views need the admin)."""
    waited = []
    for label, side in sides.items():
        config = dataclasses.replace(side.settings.cassandra_config(), login=cassandra_admin())
        admin = await CassandraStore.connect(config)
        try:
            waited.append(f"{label} {await quiet_cassandra(admin):.1f} s")
        finally:
            await admin.close()
    section.notes.append(f"before {before}, waited for quiet Cassandras: {', '.join(waited)}")


async def _replicated(side: _Side, journal_id: str, events_: int, within_s: float = 600) -> None:
    """Until the store holds the journal's last event (bounded)."""
    key = side.journals.journal(journal_id).key
    deadline = time.monotonic() + within_s
    while True:
        meta = await side.journals.store.meta(key)
        if meta is not None and (meta.seq_nr or 0) >= events_:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{journal_id} not replicated in {within_s:g} s")
        await asyncio.sleep(0.05)
