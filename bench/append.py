"""Append: latency and throughput of the direct client and of HTTP against a raw producer."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from aiokafka import AIOKafkaProducer
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from prometheus_client.parser import text_string_to_metric_families

from app.http_tokens import client_headers
from bench.common import Row, Section, Timed, median, percentile, spread, unique
from bench.profile import process_cpu_s, py_spy
from bench.raw_http import raw_http_server
from bench.workload import closed_loop, events, http_body, raw_append, raw_producer
from devtools.workers import free_port
from journal import Ack, Event, JournalKey, Journals, JsonPayload
from journal.codec import encode_events, record_headers
from journal.core import AppendHeader, Events, Json
from journal.kafka import JournalProducer, JournalWriter, TopicSpec, ensure_topic, partition_of
from journal.settings import Settings
from kjconfig.access import KafkaAccess

METHOD = (
    "Closed loop: `concurrency` lanes, each appending to its own journal in sequence, {appends}"
    " appends per repetition, {reps} repetitions after one warm-up, the modes interleaved in an "
    "order rotated every repetition; throughput is the median "
    "over repetitions (spread min..max), latency percentiles pool all repetitions. Raw "
    "baseline: an idempotent acks=all AIOKafkaProducer (linger 0, lz4 and the batch size of the"
    " writer's) sending the very record bytes (value + headers) the writer produces for the "
    "same events, to the same partition, same concurrency: new seqNrs every round, as the "
    "direct client's, so the worker replicates both alike (before, the raw records repeated "
    "seqNr 1 and the worker skipped them as duplicates, while it replicated the direct client's"
    " on the same cores). Both get their input ready-made before the clock starts: the raw "
    "producer its record bytes, the direct client the `Event` objects (an application's own "
    "cost, not the library's). HTTP: POST /journals/{{id}}/events to one real worker process "
    "(aiohttp client, one connection per lane), compared with raw HTTP: a minimal aiohttp "
    "server process that parses the body with orjson and produces it with the raw baseline's "
    "producer settings to a topic no worker replicates (`bench/raw_http.py`: no validation, "
    "codec, fold, replication or tables), the floor of any HTTP append service on this machine."
    " HTTP is asked for the Kafka acknowledgement (`?ack=kafka`, as the direct client's "
    "`Ack.KAFKA`); HTTP verified is the default, answered once the fold accepted the append "
    "(each lane's journal is its own, so every append is accepted), compared with HTTP; so is "
    "the direct client's default (`Ack.VERIFIED`, direct_verified), compared with its "
    "Kafka-acknowledged appends (direct). "
    "Contention (issue 27): {writers} HTTP writers appending 1 event at a time for "
    "{contention_s:g} s each: to journals of their own (verified, the baseline), at the end of "
    "one journal (no seqNrs: the owner numbers them) and to one journal with `expectedSeqNr`, "
    "every mode with the same events (~300-byte payloads, a tag), "
    "reading its seqNr after every 409; produce -> verdict is read from the worker's histogram "
    "over the last "
    "two. Before each measured mode the worker replicates "
    "everything appended so far: one mode's backlog does not load the next. Conditional appends"
    " take their verdicts from the worker's keys-only tail of the partitions it owns, not from "
    "its replicating agent. CPU per append, each mode: the load generator's (this process, over the"
    " appends) and the worker's (over the appends until they are replicated: it replicates "
    "every mode's but raw HTTP's), and the raw HTTP server's for raw HTTP."
)

MODES = ("raw", "direct", "direct_verified", "http_raw", "http", "http_verified")
# each mode's baseline in the rows: raw Kafka, raw HTTP for HTTP, Kafka-acknowledged appends
# for verified ones (the default)
BASELINES = {
    "direct": "raw",
    "direct_verified": "direct",
    "http_raw": "raw",
    "http": "http_raw",
    "http_verified": "http",
}
CONTENDED_WRITERS = 8


@dataclass(frozen=True, slots=True)
class AppendSizes:
    sequential: int  # appends per repetition at concurrency 1
    concurrent: int  # appends per repetition at concurrency 64
    repetitions: int
    concurrency: int = 64


# `_measure` of one run's clients, servers and URLs: (mode, per_append, concurrency, total)
Measure = Callable[[str, int, int, int], Awaitable[Timed]]


async def _measure(
    mode: str,
    per_append: int,
    concurrency: int,
    total: int,
    journals: Journals,
    raw: AIOKafkaProducer,
    http: aiohttp.ClientSession,
    url: str,
    raw_url: str,
) -> Timed:
    prefix = unique(f"{mode}{per_append}")
    partitions = journals.writer.partitions
    # every round's input, built before the clock starts (`closed_loop`'s rounds)
    rounds = range(max(1, total // concurrency))
    direct = mode in ("direct", "direct_verified")
    batches = [events(r * per_append + 1, per_append) for r in rounds] if direct else []
    records = [raw_append(r * per_append + 1, per_append) for r in rounds] if mode == "raw" else []

    async def direct_op(lane: int, round_: int) -> None:
        # "direct": answered at Kafka's acknowledgement; "direct_verified": the default,
        # answered once the fold accepted the append
        ack = Ack.KAFKA if mode == "direct" else Ack.VERIFIED
        await journals.journal(f"{prefix}-{lane}").append(batches[round_], ack=ack)

    async def raw_op(lane: int, round_: int) -> None:
        key = f"{prefix}-{lane}".encode()
        partition = partition_of(key.decode(), partitions)
        value, headers = records[round_]
        await raw.send_and_wait(
            journals.topic, value, key=key, partition=partition, headers=headers
        )

    async def http_op(lane: int, round_: int) -> None:
        body = http_body(round_ * per_append + 1, per_append)
        base = raw_url if mode == "http_raw" else url
        # "http": answered at Kafka's acknowledgement; "http_verified": the default, answered
        # once the fold accepted the append
        ack = "?ack=kafka" if mode == "http" else ""
        path = f"{base}/journals/{prefix}-{lane}/events{ack}"
        async with http.post(path, json=body) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP append: {response.status} {await response.text()}")
            await response.read()

    operation = {
        "direct": direct_op,
        "direct_verified": direct_op,
        "raw": raw_op,
        "http_raw": http_op,
        "http": http_op,
        "http_verified": http_op,
    }[mode]
    return await closed_loop(operation, concurrency, total)


async def bench_append(
    journals: Journals,
    kafka: KafkaAccess,
    worker_url: str,
    sizes: AppendSizes,
    settle: Callable[[], Awaitable[None]],
    profile: bool = False,
    worker_pid: int | None = None,
) -> Section:
    """The append section; `journals` writes to the topic the worker at `worker_url` serves;
    `settle` returns once the worker has replicated everything appended so far."""
    appends = f"{sizes.sequential} (c=1) / {sizes.concurrent} (c={sizes.concurrency})"
    method = METHOD.format(
        appends=appends,
        reps=sizes.repetitions,
        writers=CONTENDED_WRITERS,
        contention_s=CONTENTION_S,
    )
    section = Section("Append", method)
    raw_topic = f"{journals.topic}-raw-http"  # the raw HTTP baseline's: no worker replicates it
    await ensure_topic(kafka, TopicSpec(raw_topic, journals.writer.partitions))
    raw_port = free_port()
    raw_server = raw_http_server(kafka.bootstrap, raw_port, raw_topic, journals.writer.partitions)
    raw = raw_producer(kafka)
    await raw.start()
    connector = aiohttp.TCPConnector(limit=sizes.concurrency)
    try:
        # the worker's token when security is on (bench workers take the environment's settings)
        headers = client_headers(Settings.from_env())
        async with (
            raw_server as raw_pid,
            aiohttp.ClientSession(connector=connector, headers=headers) as http,
        ):
            raw_url = f"http://127.0.0.1:{raw_port}"
            # whose CPU time a mode costs beside the load generator's: the worker's (it
            # replicates every mode's appends but the raw HTTP server's, and serves HTTP), and
            # the raw HTTP server's
            servers = {"http_raw": raw_pid} | ({} if worker_pid is None else {"worker": worker_pid})

            async def measure(mode: str, per_append: int, concurrency: int, total: int) -> Timed:
                return await _measure(
                    mode, per_append, concurrency, total, journals, raw, http, worker_url, raw_url
                )

            for per_append in (1, 10):
                for concurrency in (1, sizes.concurrency):
                    total = sizes.sequential if concurrency == 1 else sizes.concurrent
                    results: dict[str, list[Timed]] = {}
                    # over the repetitions: (mode, process) -> CPU seconds
                    cpu_s: dict[tuple[str, str], float] = {}
                    for mode in MODES:
                        await measure(mode, per_append, concurrency, max(concurrency, total // 5))
                    for repetition in range(sizes.repetitions):
                        # interleaved, so drift hits all alike; rotated, so no mode always
                        # follows the same one
                        shift = repetition % len(MODES)
                        for mode in MODES[shift:] + MODES[:shift]:
                            await settle()
                            before = _cpu(servers)
                            timed = await measure(mode, per_append, concurrency, total)
                            generator = process_cpu_s(os.getpid())  # not its settling
                            results.setdefault(mode, []).append(timed)
                            await settle()  # the worker's replication is part of its cost
                            after = _cpu(servers) | {_GENERATOR: generator}
                            for process in after:
                                if process == "http_raw" and mode != "http_raw":
                                    continue  # it serves that mode alone
                                spent = after[process] - before[process]
                                cpu_s[mode, process] = cpu_s.get((mode, process), 0.0) + spent
                    _rows(section, per_append, concurrency, results)
                    per_append_us = {
                        key: spent / sum(len(run.latencies_ms) for run in results[key[0]]) * 1e6
                        for key, spent in cpu_s.items()
                    }
                    label = f"{per_append} ev/append, c={concurrency}"
                    for (mode, process), us in per_append_us.items():
                        name = f"{mode} {label}: {_CPU_NAMES[process]}"
                        section.add(Row(name, us, "us/append", note=_CPU_NOTES[process]))
                    if concurrency > 1:
                        _cpu_goals(section, label, per_append, per_append_us)
            await settle()
            await _contention(section, http, worker_url)
            if profile:
                section.profile = await _profile(measure, sizes.concurrency, sizes.concurrent)
                if worker_pid is not None:
                    section.profile += "\n\nworker during HTTP appends (1 event, c=64), py-spy:\n"
                    section.profile += await _profile_worker(worker_pid, measure, sizes.concurrency)
    finally:
        await raw.stop()
    return section


def _cpu_goals(
    section: Section, label: str, per_append: int, us: dict[tuple[str, str], float]
) -> None:
    """Issue 26's CPU goals: the direct client's CPU per append against the raw producer's
    (both in this process, which runs no worker), and the worker's per HTTP append
    (replication included) against the raw HTTP server's."""
    direct, raw = us.get(("direct", _GENERATOR)), us.get(("raw", _GENERATOR))
    if direct is not None and raw:
        limit = 1.5 if per_append == 1 else 2.0
        section.add(
            Row(
                f"direct {label}: client CPU per append",
                direct,
                "us/append",
                raw,
                f"<= {limit}x raw producer",
                direct <= limit * raw,
            )
        )
    worker, server = us.get(("http", "worker")), us.get(("http_raw", "http_raw"))
    if per_append == 1 and worker is not None and server:
        section.add(
            Row(
                f"http {label}: worker CPU per request, replication included",
                worker,
                "us/append",
                server,
                "<= 3x raw server",
                worker <= 3 * server,
            )
        )


_GENERATOR = "generator"
_CPU_NAMES = {
    _GENERATOR: "load generator CPU",
    "worker": "worker CPU",
    "http_raw": "server CPU",
}
_CPU_NOTES = {
    _GENERATOR: "this process's CPU time (user + system, every thread) over the appends alone",
    "worker": "the worker process's CPU time (user + system, every thread: HTTP, the "
    "replicating agent, drivers) over the appends, until they are replicated",
    "http_raw": "the raw HTTP server's CPU time (user + system, every thread) over its requests",
}


def _cpu(servers: dict[str, int]) -> dict[str, float]:
    """The CPU seconds used so far by the load generator (this process) and by `servers`."""
    return {_GENERATOR: process_cpu_s(os.getpid())} | {
        name: process_cpu_s(pid) for name, pid in servers.items()
    }


def _rows(
    section: Section, per_append: int, concurrency: int, results: dict[str, list[Timed]]
) -> None:
    label = f"{per_append} ev/append, c={concurrency}"
    stats: dict[str, tuple[float, float, float, float, str]] = {}
    for mode, runs in results.items():
        latencies = [ms for run in runs for ms in run.latencies_ms]
        rates = [run.per_second for run in runs]
        stats[mode] = (
            median(rates),
            percentile(latencies, 50),
            percentile(latencies, 99),
            percentile(latencies, 99.9),
            spread(rates),
        )
        section.samples[f"{mode}, {label}"] = latencies
        section.throughputs[f"{mode}, {label}"] = median(rates)
    for mode in MODES:
        base = BASELINES.get(mode, "raw")
        raw_rate, raw_p50, raw_p99, raw_p999, _ = stats[base]
        rate, p50, p99, p999, rate_spread = stats[mode]
        baseline = mode != "raw"
        rate_goal, rate_met, p99_goal, p99_met = "", None, "", None
        if mode == "http_verified" and concurrency > 1 and per_append == 1:  # issue 27
            rate_goal, rate_met = ">= 0.85x http", rate >= 0.85 * raw_rate
            p99_goal, p99_met = "<= 1.5x http", p99 <= 1.5 * raw_p99
        if mode == "direct" and concurrency > 1:  # issue 26: with a worker replicating
            rate_goal, rate_met = ">= 0.7x raw", rate >= 0.7 * raw_rate
            p99_goal, p99_met = "<= 1.5x raw", p99 <= 1.5 * raw_p99
        if mode == "http" and concurrency > 1 and per_append == 1:
            rate_goal, rate_met = ">= 0.5x raw HTTP", rate >= 0.5 * raw_rate  # issue 26
        section.add(
            Row(
                f"{mode} {label}: throughput",
                rate,
                "appends/s",
                raw_rate if baseline else None,
                rate_goal,
                rate_met,
                rate_spread,
                f"{rate * per_append:.0f} events/s",
            )
        )
        section.add(Row(f"{mode} {label}: p50", p50, "ms", raw_p50 if baseline else None))
        section.add(
            Row(f"{mode} {label}: p99", p99, "ms", raw_p99 if baseline else None, p99_goal, p99_met)
        )
        section.add(Row(f"{mode} {label}: p99.9", p999, "ms", raw_p999 if baseline else None))


CONTENTION_S = 10.0  # each contention mode runs this long


async def bench_contention(worker_url: str) -> Section:
    """The contention rows alone, in a section of their own (`--contention-only`)."""
    section = Section("Append contention", "")
    headers = client_headers(Settings.from_env())
    async with aiohttp.ClientSession(headers=headers) as http:
        await _contention(section, http, worker_url)
    return section


async def _contention(section: Section, http: aiohttp.ClientSession, url: str) -> None:
    """Issue 27's contention rows: `CONTENDED_WRITERS` HTTP writers for `CONTENTION_S` each
    mode: on journals of their own (verified appends: the baseline), at the end of one journal
    (no seqNrs: the owner numbers them), and on one journal with `expectedSeqNr` and a re-read
    of its seqNr after each 409; and, from the worker's histogram over the last two, the time
    from produce to verdict at the owner."""
    own = await _writers(http, url, "own")
    section.add(
        Row(
            f"{CONTENDED_WRITERS} writers, a journal each, verified: appends/s",
            own.accepted / own.elapsed_s,
            "appends/s",
            note=f"{own.accepted} appends in {own.elapsed_s:.1f} s: the baseline of the next",
        )
    )
    before = await _verdict_buckets(http, url)
    at_end = await _writers(http, url, "at_end")
    rate = at_end.accepted / at_end.elapsed_s
    section.add(
        Row(
            f"{CONTENDED_WRITERS} writers at the end of one journal: accepted appends/s",
            rate,
            "appends/s",
            own.accepted / own.elapsed_s,
            ">= 1000/s",
            rate >= 1000,
            note=f"baseline: the same writers on journals of their own; {at_end.rejected} of "
            f"{at_end.accepted + at_end.rejected} answers were not 200",
        )
    )
    contended = await _writers(http, url, "expected")
    rate = contended.accepted / contended.elapsed_s
    attempts = contended.accepted + contended.rejected
    section.add(
        Row(
            f"{CONTENDED_WRITERS} writers on one journal, expectedSeqNr, re-read on 409: "
            "accepted appends/s",
            rate,
            "appends/s",
            own.accepted / own.elapsed_s,
            ">= 200/s",
            rate >= 200,
            note=f"{contended.rejected} of {attempts} attempts were 409; "
            f"{2 * attempts / contended.elapsed_s:.0f} requests/s (a GET and a POST each)",
        )
    )
    after = await _verdict_buckets(http, url)
    delta = [(bound, after.get(bound, 0) - before.get(bound, 0)) for bound in sorted(after)]
    for q, goal_ms in ((50, 5.0), (99, 50.0)):
        bound_ms = _bucket_percentile(delta, q) * 1000
        section.add(
            Row(
                f"produce -> verdict at the owner (the last two modes): p{q}",
                bound_ms,
                "ms",
                None,
                f"<= {goal_ms:g} ms",
                bound_ms <= goal_ms,
                note="the upper bound of the worker's histogram bucket that holds it",
            )
        )


@dataclass(frozen=True, slots=True)
class _Tally:
    accepted: int
    rejected: int
    elapsed_s: float


async def _writers(http: aiohttp.ClientSession, url: str, mode: str) -> _Tally:
    """`CONTENDED_WRITERS` writers appending 1 event at a time for `CONTENTION_S`: `own`, each
    to a journal of its own (seqNrs it knows, verified); `at_end`, all at the end of one
    journal; `expected`, all to one journal, reading its seqNr before each expectedSeqNr."""
    journal = unique(f"contention-{mode}")
    accepted = rejected = 0
    deadline = time.perf_counter() + CONTENTION_S

    async def writer(lane: int) -> None:
        nonlocal accepted, rejected
        own_url = f"{url}/journals/{journal}-{lane}"
        shared_url = f"{url}/journals/{journal}"
        seq_nr = 0
        while time.perf_counter() < deadline:
            if mode == "own":
                body: dict[str, Json] = http_body(seq_nr + 1, 1)
                target = own_url
            elif mode == "at_end":  # the same event as the others', without its seqNr
                body, target = http_body(seq_nr + 1, 1, numbered=False), shared_url
            else:
                async with http.get(shared_url) as info:
                    seq_nr = (await info.json())["seqNr"] or 0
                body, target = http_body(seq_nr + 1, 1), shared_url
                body["expectedSeqNr"] = seq_nr
            async with http.post(f"{target}/events", json=body) as response:
                await response.read()
                if response.status == 200:
                    accepted += 1
                    seq_nr += 1
                elif response.status == 409 and mode == "expected":
                    rejected += 1
                else:
                    raise RuntimeError(f"{mode} append: {response.status}")

    started = time.perf_counter()
    await asyncio.gather(*(writer(lane) for lane in range(CONTENDED_WRITERS)))
    return _Tally(accepted, rejected, time.perf_counter() - started)


_VERDICT_HISTOGRAM = "kafka_journal_conditional_verdict_seconds"


async def _verdict_buckets(http: aiohttp.ClientSession, url: str) -> dict[float, float]:
    """The worker's verdict histogram: cumulative counts by upper bound (seconds)."""
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != _VERDICT_HISTOGRAM:
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets


def _bucket_percentile(cumulative: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket holding the q-th percentile (NaN without samples)."""
    total = cumulative[-1][1] if cumulative else 0.0
    if total <= 0:
        return float("nan")
    for bound, count in cumulative:
        if count >= q / 100 * total:
            return bound
    return float("inf")


async def _profile(measure: Measure, concurrency: int, total: int) -> str:
    """pyinstrument's view of the direct client appending 1 event at `concurrency`."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        return "(pyinstrument is not installed: no profile)"
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()  # the load generator, in this process
    await measure("direct", 1, concurrency, total)
    profiler.stop()
    text: str = profiler.output_text(unicode=False, color=False, show_all=False)
    lines = text.strip().splitlines()
    return "load generator (direct appends, 1 event, c=64), pyinstrument:\n" + "\n".join(lines[:50])


async def _profile_worker(pid: int, measure: Measure, concurrency: int, seconds: float = 8) -> str:
    """py-spy on the worker while HTTP appends of 1 event run at `concurrency`."""
    sampling = asyncio.create_task(py_spy(pid, seconds))
    while not sampling.done():
        await measure("http", 1, concurrency, concurrency * 10)
    return await sampling


COMPRESSION_METHOD = (
    "The writer of the direct client (JournalWriter: idempotent, acks=all, linger 0) with its "
    "producer uncompressed and with lz4 (kafka-journal's default), on one fresh topic: "
    "{appends} appends per repetition and codec, {reps} repetitions after one warm-up, codecs "
    "interleaved; latency percentiles pool all repetitions. Bytes: the record batch the "
    "producer sends and the broker stores (topic compression.type=producer) for one Append, "
    "built with aiokafka's own batch builder, for the bench's events (~300 B of JSON, half of "
    "it one repeated character) and for events of random text (hex, the worst case for lz4)."
)
COMPRESSIONS = ("none", "lz4")


def record_batch_bytes(value: bytes, headers: list[tuple[str, bytes]], codec: str) -> int:
    """The size of a one-record batch as the producer sends it (after compression)."""
    codec_id = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    builder = DefaultRecordBatchBuilder(2, codec_id, 0, -1, -1, -1, 1_048_576 * 10)
    builder.append(0, int(time.time() * 1000), b"journal-id", value, headers)
    return len(builder.build())


async def bench_compression(settings: Settings, appends: int, repetitions: int) -> Section:
    """The append latency and record bytes of the writer, uncompressed and with lz4."""
    section = Section(
        "Append compression", COMPRESSION_METHOD.format(appends=appends, reps=repetitions)
    )
    partitions = await ensure_topic(settings.kafka_access(), settings.topic_spec())
    writers: dict[str, JournalWriter] = {}
    producers: list[JournalProducer] = []
    try:
        for codec in COMPRESSIONS:
            compression_type = None if codec == "none" else codec
            producer = JournalProducer(
                settings.kafka_access(), linger_ms=0, compression_type=compression_type
            )
            await producer.start()
            producers.append(producer)
            writers[codec] = JournalWriter(producer, partitions)
        for per_append in (1, 10):
            latencies: dict[str, list[float]] = {codec: [] for codec in COMPRESSIONS}
            for repetition in range(repetitions + 1):
                for codec, writer in writers.items():
                    prefix = unique(f"{codec}{per_append}")
                    op = _writer_op(writer, settings.topic, prefix, per_append)
                    timed = await closed_loop(op, 1, appends)
                    if repetition > 0:  # the first is the warm-up
                        latencies[codec] += timed.latencies_ms
            _compression_rows(section, per_append, latencies)
    finally:
        for producer in producers:
            await producer.stop()
    return section


def _writer_op(
    writer: JournalWriter, topic: str, prefix: str, per_append: int
) -> Callable[[int, int], Awaitable[object]]:
    async def op(lane: int, round_: int) -> None:
        batch = events(round_ * per_append + 1, per_append)
        await writer.append(JournalKey(topic, f"{prefix}-{lane}"), Events(tuple(batch)))

    return op


def _compression_rows(section: Section, per_append: int, latencies: dict[str, list[float]]) -> None:
    label = f"{per_append} ev/append, c=1"
    value, headers = raw_append(1, per_append)
    random_events = Events(
        tuple(
            Event(n, frozenset({"bench"}), JsonPayload.of({"n": n, "pad": os.urandom(130).hex()}))
            for n in range(1, per_append + 1)
        )
    )
    random_type, random_value = encode_events(random_events)
    random_headers = record_headers(AppendHeader(random_events.range, random_type), {})
    for codec in COMPRESSIONS:
        baseline = codec != "none"
        for q in (50, 99):
            section.add(
                Row(
                    f"{codec} {label}: p{q}",
                    percentile(latencies[codec], q),
                    "ms",
                    percentile(latencies["none"], q) if baseline else None,
                )
            )
        for kind, (v, h) in {
            "bench events": (value, headers),
            "random text": (random_value, random_headers),
        }.items():
            section.add(
                Row(
                    f"{codec} {per_append} ev/append, {kind}: batch bytes",
                    record_batch_bytes(v, h, codec),
                    "B",
                    record_batch_bytes(v, h, "none") if baseline else None,
                )
            )
