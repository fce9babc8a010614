"""Reads (recovery): the direct client against a raw Cassandra read, and reads whose cost must
not grow with other journals' records (replication stopped, then Cassandra down)."""

from __future__ import annotations

import asyncio
import itertools
import resource
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from app.http_tokens import client_headers
from app.progress import Meter
from bench.common import Row, Section, median, percentile, timed, unique
from bench.raw_read_http import RawCompleteReads, RawReads
from bench.workload import events, raw_append
from devtools.workers import WorkerProcess
from journal import Ack, JournalKey, Journals
from journal.core import Indexed
from journal.kafka import end_offsets
from journal.metrics import METRICS
from journal.replication import AlreadyQuarantined, replicate_to_now, wait_replicated
from journal.settings import Settings
from journal.store import CassandraStore
from kjconfig.access import KafkaAccess
from stack import Stack

METHOD = (
    "Journals of 100 events (10 appends of 10, ~300 bytes an event) on a fresh 1-partition "
    "topic; a read is `[r async for r in journal.read()]` with the direct client, every event "
    "checked. Baseline: a raw read of the same 10 rows: the store's read statement on a driver "
    "session of its own, each row's value (an Append's events) decoded with orjson "
    "(`bench/raw_read_http.py`). Second baseline, the raw complete read: the same, plus, in "
    "parallel (asyncio.gather), "
    "the two other requests any complete read makes: the journal's row (the store's statement "
    "for it: deleteTo, the replicated offset) and the partition's high watermark (ListOffsets "
    "on an aiokafka consumer of its own); no index, no fold. The three alternate read by read, "
    "in a rotated order. (a) fully replicated (`replicate_to_now`); "
    "Kafka records written per read from the partition's end offset before and after the "
    "reads; (b) replication stopped (no replicator runs): {small:,} then {large:,} one-event "
    "Appends of other journals piled after the pointer, then the journal's last append (10 "
    "events): only it is unreplicated. The piled Appends are of {others:,} other journals; the "
    "direct client's tail index is sized to hold every journal written ({journals:,}: "
    "`KJ_TAIL_MAX_JOURNALS` raised to it where lower), else the stopped journal's last append, "
    "after the pile, would not be indexed. {reps} reads per case after {warm} warm-up reads; "
    "the tail index is caught up before timing (the warm-up reads wait for it)."
)
OFFLINE_METHOD = (
    "A worker serves a fresh 1-partition topic; {history} journals of 100 events with "
    "replicated history are written (9 appends of 10, replicated, then the last append of 10, "
    "replicated: an index that dropped runs at the store's pointer would no longer hold their "
    "first 90). Then Cassandra is stopped and {small:,}, then {large:,} one-event Appends of "
    "other journals are piled into the partition, then new journals of 100 events are "
    "appended (10 appends of 10). Reads of the new journal and, in turn, of the {history} "
    "with history: GET /journals/{{id}}/events on the worker (NDJSON, lines counted) and the "
    "direct client (connected before the outage, its tail index caught up). Both answer from "
    "Kafka alone through their index (the worker's tables, the client's tail index): the store "
    "is down. {reps} reads per case after {warm} warm-up reads. Cassandra is started again at "
    "the end."
)
HISTORY_JOURNALS = 16
OTHER_JOURNALS = 10_000  # the journals of the pile (`_fill`)
READ_JOURNALS = OTHER_JOURNALS + 2  # with the replicated journal and the stopped one


@dataclass(frozen=True, slots=True)
class ReadSizes:
    small_backlog: int
    large_backlog: int
    repetitions: int
    warmup: int = 3

    def method(self, template: str) -> str:
        """A section's method text (`METHOD`, `OFFLINE_METHOD`) at these sizes."""
        return template.format(
            history=HISTORY_JOURNALS,
            others=OTHER_JOURNALS,
            journals=READ_JOURNALS,
            small=self.small_backlog,
            large=self.large_backlog,
            reps=self.repetitions,
            warm=self.warmup,
        )


def read_settings(settings: Settings) -> Settings:
    """`settings` for "Read (recovery)"'s client: a tail index that holds every journal it
    writes (`READ_JOURNALS`). At the default bound (10,000) the pile's journals filled it, the
    stopped journal's last append went unindexed and `_caught_up` waited out its 600 s."""
    return settings.replace(tail_max_journals=max(settings.tail_max_journals, READ_JOURNALS))


async def _fill(producer: AIOKafkaProducer, topic: str, count: int) -> None:
    """`count` one-event Appends of `OTHER_JOURNALS` other journals into partition 0,
    pipelined."""
    value, headers = raw_append(1, 1)
    chunk = 5000
    meter = Meter("other journals' records", count)
    for start in range(0, count, chunk):
        sends = [
            await producer.send(
                topic,
                value,
                key=f"other-{n % OTHER_JOURNALS}".encode(),
                partition=0,
                headers=headers,
            )
            for n in range(start, min(count, start + chunk))
        ]
        await asyncio.gather(*sends)
        meter.advance(len(sends))
    meter.close()


def _producer(kafka: KafkaAccess) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        **kafka.client_options(), acks="all", linger_ms=5, max_batch_size=512 * 1024
    )


async def _write(journals: Journals, journal_id: str, last_first: int = 91) -> None:
    for first in range(1, last_first + 1, 10):
        await journals.journal(journal_id).append(events(first, 10), ack=Ack.KAFKA)


async def _sample(operation: Callable[[], Awaitable[None]], sizes: ReadSizes) -> list[float]:
    for _ in range(sizes.warmup):
        await operation()
    return [await timed(operation) for _ in range(sizes.repetitions)]


async def _interleaved(
    operations: Sequence[Callable[[], Awaitable[None]]], sizes: ReadSizes
) -> list[list[float]]:
    """`_sample` of each, read by read (the order rotated each round), so that drift hits all
    alike; the samples in the order of `operations`."""
    for _ in range(sizes.warmup):
        for operation in operations:
            await operation()
    samples: list[list[float]] = [[] for _ in operations]
    for repetition in range(sizes.repetitions):
        for step in range(len(operations)):
            index = (repetition + step) % len(operations)
            samples[index].append(await timed(operations[index]))
    return samples


def _reader(journals: Journals, journal_id: str) -> Callable[[], Awaitable[None]]:
    async def read() -> None:
        got = [r async for r in journals.journal(journal_id).read()]
        assert len(got) == 100, (journal_id, len(got))

    return read


async def _caught_up(
    journals: Journals, kafka: KafkaAccess, journal_id: str, within_s: float = 600
) -> None:
    """Until the index answers for the journal up to the partition's end (a read would then go
    through it). Asked of the index, not with reads: while it is behind, each read falls back to
    a scan of the whole pile in this process and starves the index's consumer."""
    key = JournalKey(journals.topic, journal_id)
    partition = journals.writer.partition_of(key)
    fence = (await end_offsets(kafka, journals.topic, journals.writer.partitions))[partition]
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if isinstance(await journals.index.lookup(key, partition, fence), Indexed):
            return
        await asyncio.sleep(0.2)  # it waits for its consumer up to a bound itself; then again
    raise TimeoutError("the tail index did not catch up")


async def bench_read(
    journals: Journals, store: CassandraStore, settings: Settings, sizes: ReadSizes
) -> Section:
    """`journals` must be on `settings`' fresh topic of one partition, over `store` on its
    keyspace, `settings` made by `read_settings`."""
    section = Section("Read (recovery)", sizes.method(METHOD))
    topic, kafka = journals.topic, settings.kafka_access()
    producer = _producer(kafka)
    await producer.start()
    raw = await RawReads.connect(settings)
    complete = await RawCompleteReads.start(raw, kafka)
    try:
        replicated, stopped = unique("replicated"), unique("stopped")
        await _write(journals, replicated)
        await _write(journals, stopped, last_first=81)
        await replicate_to_now(kafka, store, topic, AlreadyQuarantined())

        async def baseline() -> None:
            count = 0
            async for page in raw.pages(topic, replicated):
                count += len(page)
            assert count == 100, count

        async def complete_baseline() -> None:
            rows, row, _ = await complete.read(topic, replicated, 0)
            assert len(rows) == 100 and row is not None, (len(rows), row)

        end_before = (await end_offsets(kafka, topic, 1))[0]
        base, base_complete, replicated_reads = await _interleaved(
            (baseline, complete_baseline, _reader(journals, replicated)), sizes
        )
        written = (await end_offsets(kafka, topic, 1))[0] - end_before
        reads_done = sizes.warmup + sizes.repetitions

        await _fill(producer, topic, sizes.small_backlog)
        await journals.journal(stopped).append(events(91, 10), ack=Ack.KAFKA)
        await _caught_up(journals, kafka, stopped)
        small = await _sample(_reader(journals, stopped), sizes)
        await _fill(producer, topic, sizes.large_backlog - sizes.small_backlog)
        await _caught_up(journals, kafka, stopped)
        large = await _sample(_reader(journals, stopped), sizes)
    finally:
        await complete.stop()
        await raw.close()
        await producer.stop()

    base_p50 = percentile(base, 50)
    section.samples["baseline (raw read of the rows)"] = base
    section.add(Row("baseline (raw read of the rows): p50", base_p50, "ms"))
    section.samples["replicated"] = replicated_reads
    section.add(
        Row(
            "replicated: p50",
            percentile(replicated_reads, 50),
            "ms",
            base_p50,
            "p50 <= 1.3x baseline",
            percentile(replicated_reads, 50) <= 1.3 * base_p50,
            f"{min(replicated_reads):.3g}..{max(replicated_reads):.3g}",
        )
    )
    section.add(Row("replicated: p99", percentile(replicated_reads, 99), "ms"))
    complete_p50 = percentile(base_complete, 50)
    name = "raw complete read (rows, journal row, high watermark)"
    section.samples[name] = base_complete
    section.add(Row(f"{name}: p50", complete_p50, "ms", spread=_spread(base_complete)))
    # the raw complete read alone is 1.4-1.9x the raw page here (issue 26's note): the 1.3x
    # goal above is out of any complete read's reach, so ours is held to the complete read
    complete_ratio = percentile(replicated_reads, 50) / complete_p50
    section.add(
        Row(
            "replicated: p50 / raw complete read's",
            complete_ratio,
            "x",
            goal="<= 1.1x (proposed)",
            met=complete_ratio <= 1.1,
            note="the ratio left once the baseline makes the same three requests",
        )
    )
    section.add(
        Row(
            "Kafka records written per read",
            written / reads_done,
            "records",
            goal="0",
            met=written == 0,
            note=f"{written} records over {reads_done} reads",
        )
    )
    _backlog_rows(section, "replication stopped", sizes, small, large)
    return section


def _backlog_rows(
    section: Section,
    label: str,
    sizes: ReadSizes,
    small: list[float],
    large: list[float],
    p50_goal_ms: float = 30,
    flat: float = 1.3,
) -> None:
    small_p50, large_p50 = percentile(small, 50), percentile(large, 50)
    for count, samples in ((sizes.small_backlog, small), (sizes.large_backlog, large)):
        name = f"{label}, {count:,} other records"
        section.samples[name] = samples
        p50 = percentile(samples, 50)
        goal = f"p50 <= {p50_goal_ms:g} ms"
        section.add(
            Row(f"{name}: p50", p50, "ms", None, goal, p50 <= p50_goal_ms, _spread(samples))
        )
        section.add(Row(f"{name}: p99", percentile(samples, 99), "ms"))
    section.add(
        Row(
            f"{label}: p50 at {sizes.large_backlog:,} / at {sizes.small_backlog:,}",
            large_p50 / small_p50,
            "x",
            goal=f"<= {flat:g} (flat)",
            met=large_p50 <= flat * small_p50,
        )
    )


def _spread(samples: list[float]) -> str:
    return f"{min(samples):.3g}..{max(samples):.3g}"


async def bench_offline(
    journals: Journals,
    store: CassandraStore,
    worker: WorkerProcess,
    stack: Stack,
    sizes: ReadSizes,
) -> Section:
    """Reads with Cassandra down; `journals` (over `store`) and `worker` on a fresh
    1-partition topic."""
    section = Section("Reads with Cassandra down", sizes.method(OFFLINE_METHOD))
    kafka, topic = worker.settings.kafka_access(), journals.topic
    await worker.wait_ready()
    await _write(journals, unique("before"))
    history = [unique("history") for _ in range(HISTORY_JOURNALS)]
    for journal_id in history:
        await _write(journals, journal_id, last_first=81)
    await wait_replicated(store, topic, await end_offsets(kafka, topic, 1), timeout_s=300)
    for journal_id in history:  # once the store holds the rest: written again past the pointer
        await journals.journal(journal_id).append(events(91, 10), ack=Ack.KAFKA)
    await wait_replicated(store, topic, await end_offsets(kafka, topic, 1), timeout_s=300)
    in_turn = itertools.cycle(history)
    producer = _producer(kafka)
    await producer.start()
    timeout = aiohttp.ClientTimeout(total=120)
    samples: dict[tuple[str, int], list[float]] = {}
    await asyncio.to_thread(stack.cassandra.stop)
    try:
        headers = client_headers(worker.settings)
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:
            piled = 0
            for backlog in (sizes.small_backlog, sizes.large_backlog):
                await _fill(producer, topic, backlog - piled)
                piled = backlog
                journal_id = unique("offline")
                await _write(journals, journal_id)
                await worker_at(worker, http, (await end_offsets(kafka, topic, 1))[0])
                url = f"{worker.url}/journals/{journal_id}/events"

                async def over_http(url: str = url) -> None:
                    async with http.get(url) as answer:
                        assert answer.status == 200, await answer.text()
                        lines = (await answer.read()).count(b"\n")
                        assert lines == 100, lines

                async def history_over_http() -> None:
                    await over_http(f"{worker.url}/journals/{next(in_turn)}/events")

                async def history_direct() -> None:
                    await _reader(journals, next(in_turn))()

                await _caught_up(journals, kafka, journal_id)
                samples[("worker", backlog)] = await _sample(over_http, sizes)
                samples[("worker history", backlog)] = await _sample(history_over_http, sizes)
                misses_before = _index_misses()
                samples[("direct", backlog)] = await _sample(_reader(journals, journal_id), sizes)
                samples[("direct history", backlog)] = await _sample(history_direct, sizes)
                misses = {
                    reason: count - misses_before.get(reason, 0.0)
                    for reason, count in _index_misses().items()
                    if count > misses_before.get(reason, 0.0)
                }
                # a read its index could not answer scans the partition: say why, if any did
                section.notes.append(
                    f"direct, {backlog:,} other records: reads its tail index could not answer: "
                    + (", ".join(f"{n:.0f} ({r})" for r, n in misses.items()) or "none")
                )
        memory = worker.memory_kib()
    finally:
        await producer.stop()
        await asyncio.to_thread(stack.cassandra.start)
    for who in ("worker", "direct"):
        small, large = samples[(who, sizes.small_backlog)], samples[(who, sizes.large_backlog)]
        _backlog_rows(section, f"{who}, Cassandra down", sizes, small, large)
    for who in ("worker", "direct"):  # issue 28's goals: a day's backlog is ~300,000 records
        key = f"{who} history"
        small, large = samples[(key, sizes.small_backlog)], samples[(key, sizes.large_backlog)]
        label = f"{who}, Cassandra down, replicated history"
        _backlog_rows(section, label, sizes, small, large, p50_goal_ms=50, flat=1.5)
    section.add(
        Row("worker VmHWM (peak RSS) with the pile unreplicated", memory["VmHWM"] / 1024, "MB")
    )
    section.add(Row("direct client peak RSS", _own_peak_rss_mb(), "MB"))
    # the simulated outage ends: how fast the worker replicates the pile once Cassandra is back
    started = time.monotonic()
    ends = await end_offsets(kafka, topic, 1)
    await wait_replicated(store, topic, ends, timeout_s=1800)
    seconds = time.monotonic() - started
    section.add(
        Row(
            "catch-up after Cassandra is back",
            ends[0] / seconds,
            "records/s",
            note=f"{ends[0]:,} records in {seconds:.0f} s, driver reconnection included",
        )
    )
    return section


def _index_misses() -> dict[str, float]:
    """This process's index misses so far, by reason (journal/kafka/tail.py `lookup`)."""
    return {
        sample.labels["reason"]: sample.value
        for family in METRICS.registry.collect()
        for sample in family.samples
        if sample.name == "kafka_journal_index_misses_total"
    }


def _own_peak_rss_mb() -> float:
    """This process's peak RSS (the direct client and its tail index live here)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def worker_at(
    worker: WorkerProcess,
    http: aiohttp.ClientSession,
    end: int,
    poll_s: float = 1.0,
    partition: int | None = None,
) -> None:
    """Until the worker's agent has handled the partition up to `end` (its /metrics say):
    asked with reads instead, each would scan the pile while the agent is behind. `partition`
    names it where the worker owns several (None: any of them)."""
    deadline = time.monotonic() + 1800
    label = "{" if partition is None else f'{{partition="{partition}"'
    while time.monotonic() < deadline:
        async with http.get(f"{worker.url}/metrics") as answer:
            text = await answer.text()
        offsets = [
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith("kafka_journal_agent_offset" + label)
        ]
        if offsets and max(offsets) >= end - 1:
            return
        await asyncio.sleep(poll_s)
    raise TimeoutError(f"the worker's agent did not reach offset {end - 1}")


PILE_METHOD = (
    "A worker serves a fresh 1-partition topic; {history} journals of 100 events (10 appends "
    "of 10) are written and replicated. Then Cassandra is stopped and {pile:,} one-event "
    "Appends of other journals are piled into the partition at once; from the end of the pile "
    "one reader reads the history journals in turn over HTTP, one read at a time (a 503 counts "
    "as slow). Time until reads are fast again: from the end of the pile until the median of "
    "the last {window} reads is at most 50 ms; p50 after: the next {after} reads. The agent's "
    "indexing rate: the pile over the time until its offset (/metrics) reached the end; "
    "baseline: a bare consumer that only counts the partition's records, in the same run, "
    "after the reads."
)
_FAST_WINDOW = 20
_FAST_MS = 50.0
_AFTER_READS = 100


async def bench_offline_pile(
    journals: Journals, store: CassandraStore, worker: WorkerProcess, stack: Stack, pile: int
) -> Section:
    """Reads of journals with replicated history right after a pile, Cassandra down (issue
    43): the bench above waits for the worker to reach the end before it reads; this one
    reads from the moment the pile is written."""
    method = PILE_METHOD.format(
        history=HISTORY_JOURNALS, pile=pile, window=_FAST_WINDOW, after=_AFTER_READS
    )
    section = Section("Reads with Cassandra down, right after a pile", method)
    kafka, topic = worker.settings.kafka_access(), journals.topic
    await worker.wait_ready()
    history = [unique("history") for _ in range(HISTORY_JOURNALS)]
    for journal_id in history:
        await _write(journals, journal_id)
    await wait_replicated(store, topic, await end_offsets(kafka, topic, 1), timeout_s=300)
    in_turn = itertools.cycle(history)
    producer = _producer(kafka)
    await producer.start()
    timeout = aiohttp.ClientTimeout(total=120)
    await asyncio.to_thread(stack.cassandra.stop)
    try:
        headers = client_headers(worker.settings)
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:

            async def read() -> float:
                """Milliseconds of one read; infinite for a 503."""
                url = f"{worker.url}/journals/{next(in_turn)}/events"
                started = time.perf_counter()
                async with http.get(url) as answer:
                    body = await answer.read()
                    if answer.status == 503:
                        return float("inf")
                    assert answer.status == 200, body
                    assert body.count(b"\n") == 100
                return (time.perf_counter() - started) * 1000

            await _fill(producer, topic, pile)
            end = (await end_offsets(kafka, topic, 1))[0]
            piled = time.monotonic()
            recent: list[float] = []
            reads = refused = 0
            agent_at_end: float | None = None
            while len(recent) < _FAST_WINDOW or median(recent[-_FAST_WINDOW:]) > _FAST_MS:
                if time.monotonic() - piled > 3600:
                    raise TimeoutError("reads were not fast again within an hour")
                took = await read()
                reads, refused = reads + 1, refused + (took == float("inf"))
                recent = [*recent[-_FAST_WINDOW + 1 :], took]
                if agent_at_end is None and reads % 10 == 0 and await _agent_at(worker, http, end):
                    agent_at_end = time.monotonic() - piled
            fast_after = time.monotonic() - piled
            after = [await read() for _ in range(_AFTER_READS)]
            if agent_at_end is None:
                await worker_at(worker, http, end)
                agent_at_end = time.monotonic() - piled
        memory = worker.memory_kib()
    finally:
        await producer.stop()
        await asyncio.to_thread(stack.cassandra.start)
    consumer_s = await _count_records(kafka, topic, end)
    section.add(
        Row(
            "time until reads are fast again",
            fast_after,
            "s",
            goal="<= 60",
            met=fast_after <= 60,
            note=f"{reads} reads meanwhile, {refused} of them 503",
        )
    )
    section.add(
        Row("p50 after", percentile(after, 50), "ms", goal="<= 50", met=percentile(after, 50) <= 50)
    )
    section.add(Row("p99 after", percentile(after, 99), "ms"))
    section.add(
        Row(
            "agent's indexing of the pile, Cassandra down",
            pile / agent_at_end,
            "records/s",
            end / consumer_s,
            note=f"reached the end {agent_at_end:.0f} s after the pile",
        )
    )
    section.add(Row("worker VmHWM (peak RSS)", memory["VmHWM"] / 1024, "MB"))
    return section


async def _agent_at(worker: WorkerProcess, http: aiohttp.ClientSession, end: int) -> bool:
    async with http.get(f"{worker.url}/metrics") as answer:
        text = await answer.text()
    return any(
        float(line.split()[-1]) >= end - 1
        for line in text.splitlines()
        if line.startswith("kafka_journal_agent_offset{")
    )


async def _count_records(kafka: KafkaAccess, topic: str, end: int) -> float:
    """Seconds a bare consumer takes to be handed partition 0's records up to `end`."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        started = time.perf_counter()
        while await consumer.position(tp) < end:
            await consumer.getmany(tp, timeout_ms=200)
        return time.perf_counter() - started
    finally:
        await consumer.stop()
