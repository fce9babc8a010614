"""Replication: events/s from Kafka into Cassandra per worker, and lag at a steady rate."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.progress import Meter
from bench.common import Row, Section, percentile, unique
from bench.environment import worker
from bench.profile import py_spy
from bench.workload import closed_loop, events, payload
from devtools.workers import WorkerProcess
from journal import Ack, Event, JournalKey, Journals, JsonPayload, Position
from journal.codec import encode_events
from journal.core import ActionRecord, AppendHeader, Events, SeqRange
from journal.kafka import JournalProducer, TopicSpec, end_offsets, ensure_topic, quarantine_topic
from journal.replication import (
    AlreadyQuarantined,
    KafkaQuarantine,
    replicate_to_now,
    wait_replicated,
)
from journal.settings import Settings
from journal.store import CassandraStore, EventualJournal, Statements, execute, record_row

METHOD = (
    "{events:,} events ({appends:,} appends of 10, 100 journals, 3 partitions) are written "
    "with the direct client before the worker starts; once it is ready, the events still "
    "unreplicated are timed until every pointer reaches the end of its partition (pointers "
    "polled every 50 ms). The same records are also replicated in-process by the core's "
    "`replicate_to_now` into a fresh keyspace. 1-event appends: {one_event:,} of them (100 "
    "journals) on a fresh 3-partition topic, replicated by a worker of their own started "
    "once they are written (timed as above), then in-process. Baselines, through the same "
    "driver into a fresh keyspace, 64 requests in flight: {raw:,} raw single-row INSERTs of "
    "the same event rows, and {raw_batched:,} rows in unlogged batches of 10 rows of one "
    "journal's segment (one Cassandra partition), the shape replication writes a journal's "
    "events in: the worker's headline is against these. "
    "Lag: appends of 10 events paced at 20%, then 30% of the worker's replication rate "
    "measured above (rounded to 100 events/s) for {seconds} s each while the worker "
    "runs, the first point's appends all replicated before the second starts; lag = time from "
    "the append's acknowledgement until the partition's pointer "
    "covers its offset (50 ms polling: lags are rounded up to that resolution); an append "
    "still unreplicated {lag_wait_s:g} s after the writes stop counts at the time it waited "
    "by then (at least {lag_wait_s:g} s: a lower bound), in the percentiles; the host's "
    "busy fraction (all cores, /proc/stat) over each point is noted. No profiler "
    "runs while a rate is measured: the profile comes from a run of its own, after them."
)


@dataclass(frozen=True, slots=True)
class ReplicationSizes:
    events: int
    raw_rows: int
    lag_seconds: float
    malformed: int = 1000  # quarantine rate: malformed records, and as many valid ones


async def write_backlog(
    journals: Journals, count: int, per_append: int = 10, journal_count: int = 100
) -> int:
    """`count` events in appends of `per_append` to `journal_count` journals in turn; the
    number of appends. A journal's appends go one after the other (a lane each), so its seqNrs
    reach Kafka in order."""
    appends = count // per_append
    prefix = unique("repl")
    meter = Meter("backlog", count, "events")  # a setup of minutes at the full sizes

    async def write(lane: int, round_: int) -> None:
        first = round_ * per_append + 1
        await journals.journal(f"{prefix}-{lane}").append(events(first, per_append), ack=Ack.KAFKA)
        meter.advance(per_append)

    await closed_loop(write, journal_count, appends)
    meter.close()
    return appends


async def backlog_on_fresh_topic(
    settings: Settings,
    prefix: str,
    events: int,
    per_append: int,
    store: CassandraStore,
    journal_count: int = 100,
) -> Settings:
    """`settings` on a fresh topic holding `events` in appends of `per_append` over
    `journal_count` journals (`write_backlog`)."""
    fresh = settings.replace(topic=unique(prefix))
    async with await Journals.connect(fresh, store=store) as journals:
        await write_backlog(journals, events, per_append, journal_count)
    return fresh


async def replicate_with_worker(
    settings: Settings,
    worker: WorkerProcess,
    store: EventualJournal,
    section: Section,
    per_append: int = 10,
    backlog_from: dict[int, int] | None = None,
) -> float:
    """Starts `worker` on a topic holding a backlog; the events/s it replicates them at.
    `backlog_from`: each partition's end before the backlog was written (a topic replicated up
    to there, its worker stopped since); none: the whole topic is the backlog.
    Never under a profiler: sampling the worker (py-spy, 100 Hz) took half its rate on this
    2-core machine (26,223 -> 12,440 events/s); `profile_catch_up` profiles a run of its own."""
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    started = time.monotonic()
    worker.start()
    await worker.wait_ready()
    ready = time.monotonic()
    pointers = await store.pointers(settings.topic)
    remaining = sum(end - 1 - pointers.get(p, -1) for p, end in ends.items())
    await wait_replicated(store, settings.topic, ends, timeout_s=900)
    done = time.monotonic()
    total = sum(end - (backlog_from or {}).get(p, 0) for p, end in ends.items())
    if remaining >= total // 5 and done > ready:
        rate = remaining * per_append / (done - ready)
        section.notes.append(
            f"worker start to ready {ready - started:.1f} s; {remaining:,} of {total:,} records "
            f"were left at readiness and took {done - ready:.1f} s"
        )
    else:  # replication was mostly done during start-up: count from the process start
        rate = total * per_append / (done - started)
        section.notes.append(
            f"replication mostly finished during worker start-up ({ready - started:.1f} s): "
            f"the rate counts from the process start, {done - started:.1f} s for {total:,} "
            "records (start-up included, so this understates the agent's rate)"
        )
    return rate


async def profile_catch_up(
    settings: Settings, store: CassandraStore, datadir: Path, events: int
) -> str:
    """py-spy on a worker of its own catching up on `events` in 10-event Appends on a fresh
    topic (its rate, slowed by the sampling, is not reported)."""
    fresh = await backlog_on_fresh_topic(settings, "bench_profiled", events, 10, store)
    ends = await end_offsets(fresh.kafka_access(), fresh.topic, fresh.partitions)
    process = worker(fresh, datadir)
    try:
        process.start()
        await process.wait_ready()
        sampling = asyncio.create_task(py_spy(process.pid, 8))
        await wait_replicated(store, fresh.topic, ends, timeout_s=900)
        return "worker catching up on a backlog, py-spy (first 8 s):\n" + await sampling
    finally:
        process.stop()


async def replicate_in_process(settings: Settings, per_append: int = 10) -> float:
    """`replicate_to_now` of the whole topic into a fresh keyspace: events/s."""
    fresh = settings.replace(keyspace=unique("bench_core"))
    store = await CassandraStore.connect(fresh.cassandra_config())
    try:
        ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
        started = time.monotonic()
        await replicate_to_now(settings.kafka_access(), store, settings.topic, AlreadyQuarantined())
        return sum(ends.values()) * per_append / (time.monotonic() - started)
    finally:
        await store.close()


# An Append's header without the payloadType the wire format requires: what a new user's
# hand-written producer sends (the flood)
_RAW_TAGS = frozenset({"bench"})
MALFORMED_HEADER = b'{"append": {"range": {"from": 1, "to": 1}}}'


async def quarantine_rate(settings: Settings, records: int) -> tuple[float, float]:
    """`replicate_to_now` with the Kafka quarantine, on fresh 1-partition topics: records/s
    over `records` malformed records, and over as many valid 1-event Appends."""
    malformed = settings.replace(topic=unique("bench_malformed"), partitions=1)
    valid = settings.replace(topic=unique("bench_valid"), partitions=1)
    for topic in (malformed.topic, quarantine_topic(malformed.topic), valid.topic):
        await ensure_topic(settings.kafka_access(), TopicSpec(topic, 1))
    producer = JournalProducer(settings.kafka_access())
    await producer.start()
    journals = await Journals.connect(valid)
    store = await CassandraStore.connect(
        settings.replace(keyspace=unique("bench_q")).cassandra_config()
    )
    try:
        headers = [("journal.action", MALFORMED_HEADER)]
        sent = [
            await producer.send(
                malformed.topic, b"{}", key=f"flood-{n % 100}".encode(), headers=headers
            )
            for n in range(records)
        ]
        await asyncio.gather(*sent)
        await write_backlog(journals, records, per_append=1)
        rates = []
        for topic in (malformed.topic, valid.topic):
            started = time.monotonic()
            await replicate_to_now(settings.kafka_access(), store, topic, KafkaQuarantine(producer))
            rates.append(records / (time.monotonic() - started))
        return rates[0], rates[1]
    finally:
        await store.close()
        await journals.close()
        await producer.stop()


async def replicate_one_event_appends(
    settings: Settings, store: CassandraStore, count: int
) -> float:
    """`replicate_to_now` of `count` 1-event Appends on a fresh topic: events/s."""
    fresh = await backlog_on_fresh_topic(settings, "bench_one_event", count, 1, store)
    return await replicate_in_process(fresh, per_append=1)


async def replicate_one_event_appends_with_worker(
    settings: Settings, store: CassandraStore, datadir: Path, count: int
) -> tuple[float, Section]:
    """A worker of its own started on a fresh topic holding `count` 1-event Appends: the
    events/s it replicates them at, and the section its notes went to."""
    fresh = await backlog_on_fresh_topic(settings, "bench_one_event_worker", count, 1, store)
    process = worker(fresh, datadir)
    notes = Section("", "")
    try:
        return await replicate_with_worker(fresh, process, store, notes, per_append=1), notes
    finally:
        process.stop()


def raw_slot(
    lane: int, round_: int, lanes: int, per_batch: int, journals: int | None
) -> tuple[str, int]:
    """The journal and first seqNr of a raw INSERT's row: without `journals`, each lane a
    journal of its own; with it, the lanes share that many journals, each numbered on from
    the rows of the lanes before (one journal: every lane's rows are one journal's)."""
    if journals is None:
        return f"raw-{lane}", round_ * per_batch + 1
    append, journal = divmod(round_ * lanes + lane, journals)  # the append-th of its journal
    return f"raw-{journal}", append * per_batch + 1


async def raw_inserts(
    settings: Settings,
    rows: int,
    per_batch: int = 1,
    lanes: int = 64,
    journals: int | None = None,
) -> float:
    """Raw concurrent INSERTs (`lanes` in flight; each lane a journal of its own, or over
    `journals` journals: `raw_slot`) of `rows` events as the store writes them (its own insert
    statement and row codec, none of replication's planning): events/s. Each request is one
    `event_records` row, an Append of `per_batch` events (a 10-event append's by default in
    the section, one event otherwise), its value encoded once beforehand, as Kafka would hold
    it."""
    fresh = settings.replace(keyspace=unique("bench_raw"))
    store = await CassandraStore.connect(fresh.cassandra_config())
    try:
        access = store.keyspace_access
        statements = await asyncio.to_thread(  # prepare blocks
            Statements, access.session, access.keyspace, access.write_level
        )
        insert, size = statements.insert_record, fresh.segment_size
        now = datetime.now(UTC)
        stamp = int(time.time() * 1_000_000)

        def row(journal_id: str, first: int) -> tuple[Any, ...]:
            batch = tuple(
                Event(n, _RAW_TAGS, JsonPayload.of(payload(n)))
                for n in range(first, first + per_batch)
            )
            kind, value = encode_events(Events(batch))
            header = AppendHeader(SeqRange(first, first + per_batch - 1), kind)
            key = JournalKey(fresh.topic, journal_id)
            append = ActionRecord(key, 0, first, now, header, value, {})
            return record_row(key, size, append, stamp)

        async def write(lane: int, round_: int) -> None:
            slot = raw_slot(lane, round_, lanes, per_batch, journals)
            await execute(access.session, insert, row(*slot))

        timed = await closed_loop(write, lanes, rows // per_batch)
        return timed.per_second * per_batch
    finally:
        await store.close()


SPREAD_METHOD = (
    "{events:,} events ({appends:,} appends of 10 events of ~300 bytes, {spread}) are written "
    "with the direct client to a fresh topic of {partitions} partition(s); then a worker of "
    "its own starts and the events still unreplicated once it is ready are timed until every "
    "pointer reaches its partition's end (polled every 50 ms). Baseline, once Cassandra is "
    "quiet again: the same {events:,} event rows ({journals} journal(s) of {per_journal:,} "
    "events) INSERTed into a fresh keyspace through the same driver, one 10-event Append's "
    "row a request (one journal's segment: one Cassandra partition, as the store writes a "
    "journal's Appends), 100 requests in flight: the most this machine writes of those rows."
)


def spread_title(journals: int) -> str:
    """The section of a backlog over `journals` journals: the full run's spread one at 100."""
    if journals == 100:
        return "Replication of a spread backlog"
    return f"Replication of a backlog of {journals} journal{'s' if journals > 1 else ''}"


async def bench_spread_backlog(
    settings: Settings,
    store: CassandraStore,
    datadir: Path,
    events: int,
    quiet: Callable[[], Awaitable[float]],
    journals: int = 100,
) -> Section:
    """A worker of its own replicating a backlog of `events` in 10-event appends over
    `journals` journals, against raw INSERTs of as many events in 10-event Append rows of as
    many journals; `quiet` waits for Cassandra's background work in between."""
    appends = events // 10
    spread = "one journal" if journals == 1 else f"{journals} journals in turn"
    over = "of one journal" if journals == 1 else f"over {journals} journals"
    section = Section(
        spread_title(journals),
        SPREAD_METHOD.format(
            events=events,
            appends=appends,
            spread=spread,
            partitions=settings.partitions,
            journals=journals,
            per_journal=events // journals,
        ),
    )
    fresh = await backlog_on_fresh_topic(settings, "bench_spread", events, 10, store, journals)
    process = worker(fresh, datadir)
    try:
        await quiet()
        worker_rate = await replicate_with_worker(fresh, process, store, section)
    finally:
        process.stop()
    waited = await quiet()
    raw_rate = await raw_inserts(
        settings, appends * 10, per_batch=RAW_BATCH, lanes=100, journals=journals
    )
    section.notes.append(f"Cassandra's compactions let finish before the baseline: {waited:.0f} s")
    section.throughputs["worker"] = worker_rate
    section.throughputs[f"raw INSERTs of {RAW_BATCH}-event Append rows"] = raw_rate
    section.add(
        Row(
            f"worker, backlog {over}: events/s",
            worker_rate,
            "events/s",
            raw_rate,
            ">= 0.9x raw",
            worker_rate >= 0.9 * raw_rate,
            note=f"{appends * 10:,} events",
        )
    )
    section.add(
        Row(
            f"raw INSERTs of {RAW_BATCH}-event Append rows: events/s",
            raw_rate,
            "events/s",
            note=f"{appends * 10:,} events",
        )
    )
    return section


# how long the lag's polling goes on once the writes stop; an append still unreplicated then
# counts at the time it waited (a lower bound)
LAG_WAIT_S = 120.0


@dataclass(frozen=True, slots=True)
class Lags:
    lags: list[float]  # ms, one per append, the unreplicated ones' at their wait so far
    offered: float  # events/s
    unreplicated: int  # appends still unreplicated `LAG_WAIT_S` after the writes stopped


async def lag(
    journals: Journals,
    store: CassandraStore,
    rate: int,
    seconds: float,
    longer: Callable[[], bool] = lambda: False,
) -> Lags:
    """Appends of 10 events paced at `rate` for `seconds`, and on while `longer()` says so:
    their lags and the events/s offered."""
    loop = asyncio.get_running_loop()
    appends = int(rate / 10 * seconds)
    interval = 10 / rate
    prefix = unique("lag")
    lanes = 50
    next_seq = [1] * lanes
    pending: list[tuple[float, Position]] = []
    lags: list[float] = []
    writing = True

    async def one(index: int) -> None:
        lane = index % lanes
        first = next_seq[lane]
        next_seq[lane] += 10
        position = await journals.journal(f"{prefix}-{lane}").append(
            events(first, 10), ack=Ack.KAFKA
        )
        pending.append((loop.time(), position))

    async def poll() -> None:
        deadline = float("inf")
        while writing or (pending and loop.time() < deadline):
            if not writing and deadline == float("inf"):
                deadline = loop.time() + LAG_WAIT_S
            pointers = await store.pointers(journals.topic)
            now = loop.time()
            keep = []
            for at, position in pending:
                if pointers.get(position.partition, -1) >= position.offset:
                    lags.append((now - at) * 1000)
                else:
                    keep.append((at, position))
            pending[:] = keep
            await asyncio.sleep(0.05)

    poller = asyncio.create_task(poll())
    started = loop.time()
    tasks: list[asyncio.Task[None]] = []
    index = 0
    while index < appends or longer():
        delay = started + index * interval - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index)))
        index += 1
    await asyncio.gather(*tasks)
    offered = index * 10 / (loop.time() - started)
    writing = False
    await poller
    unreplicated = len(pending)
    now = loop.time()
    lags.extend((now - at) * 1000 for at, _ in pending)  # each waited LAG_WAIT_S at least
    return Lags(lags, offered, unreplicated)


@dataclass(frozen=True, slots=True)
class ReplicationResults:
    """What the replication section measured, in one run."""

    worker_rate: float  # events/s, 10-event appends
    worker_one_event_rate: float  # events/s, 1-event appends
    core_rate: float  # replicate_to_now, 10-event appends
    core_one_event_rate: float  # replicate_to_now, 1-event appends
    raw_rate: float  # events/s, INSERTs of 1-event Append rows
    raw_batched_rate: float  # events/s, INSERTs of RAW_BATCH-event Append rows
    lags: tuple[LagPoint, ...]  # 20% of the capacity, then 30%
    quarantine: tuple[float, float]  # malformed records/s, valid records/s


@dataclass(frozen=True, slots=True)
class LagPoint:
    """The lags at one offered rate, a fraction of the capacity measured in the same run."""

    fraction: float
    target: int  # events/s asked for
    lags: list[float]  # ms
    offered: float  # events/s offered
    host_busy: float  # of all cores, over the point
    unreplicated: int = 0  # of the appends, still unreplicated `LAG_WAIT_S` after the writes


RAW_BATCH = 10  # events per Append row of the baseline: a 10-event append's


def replication_rows(section: Section, results: ReplicationResults) -> None:
    r = results
    section.throughputs["worker (Faust agent)"] = r.worker_rate
    section.throughputs["worker, 1-event appends"] = r.worker_one_event_rate
    section.throughputs["replicate_to_now (in-process)"] = r.core_rate
    section.throughputs["raw INSERTs of 1-event Append rows"] = r.raw_rate
    section.throughputs[f"raw INSERTs of {RAW_BATCH}-event Append rows"] = r.raw_batched_rate
    for point in r.lags:
        section.samples[f"lag at {point.target:,} events/s"] = point.lags
    section.add(
        Row(
            "worker: events/s",
            r.worker_rate,
            "events/s",
            r.raw_batched_rate,
            ">= 0.9x raw",
            r.worker_rate >= 0.9 * r.raw_batched_rate,
            note=f"baseline: raw INSERTs of 10-event Append rows; "
            f"{r.worker_rate / r.raw_rate:.2f}x those of 1-event ones",
        )
    )
    section.add(
        Row(
            "worker, 1-event appends: events/s",
            r.worker_one_event_rate,
            "events/s",
            r.raw_rate,
            ">= 8000/s",
            r.worker_one_event_rate >= 8_000,
            note=f"{r.worker_one_event_rate / r.raw_batched_rate:.2f}x raw 10-event Append rows",
        )
    )
    section.add(Row("replicate_to_now: events/s", r.core_rate, "events/s", r.raw_rate))
    section.add(
        Row(
            "replicate_to_now, 1-event appends: events/s",
            r.core_one_event_rate,
            "events/s",
            r.raw_rate,
        )
    )
    section.add(Row("raw INSERTs of 1-event Append rows: events/s", r.raw_rate, "events/s"))
    section.add(
        Row(
            f"raw INSERTs of {RAW_BATCH}-event Append rows: events/s",
            r.raw_batched_rate,
            "events/s",
            r.raw_rate,
            note="the most this driver and machine write of Append rows as replication "
            "writes them, a request each",
        )
    )
    malformed_rate, valid_rate = r.quarantine
    section.add(
        Row(
            "quarantine of malformed records: records/s",
            malformed_rate,
            "records/s",
            valid_rate,
            ">= 1x valid",
            malformed_rate >= valid_rate,
            note=f"valid 1-event appends: {valid_rate:,.0f} records/s",
        )
    )
    for point in r.lags:
        _lag_rows(section, point)


# issue 26's goal is the 30% point's; at 30% of a capacity measured with the host to the
# worker alone, the load generator, Kafka and Cassandra keep this 2-core host ~90% busy (the
# note's sweep), and the lag's tail is that queue: the 20% point is held to it instead
LAG_GOALS = {0.2: "<= 500 ms (proposed)", 0.3: "<= 500 ms"}


def _lag_rows(section: Section, point: LagPoint) -> None:
    at = f"{point.target:,} events/s ({point.fraction:.0%} of the capacity)"
    section.add(
        Row(
            f"lag p50 at {at}",
            percentile(point.lags, 50),
            "ms",
            note=f"offered {point.offered:,.0f} events/s; host {point.host_busy:.0%} busy",
        )
    )
    p99 = percentile(point.lags, 99)
    section.add(
        Row(
            f"lag p99 at {at}, unreplicated appends counted",
            p99,
            "ms",
            goal=LAG_GOALS[point.fraction],
            met=p99 <= 500,
            note=f"{len(point.lags):,} appends, {point.unreplicated:,} of them still "
            f"unreplicated {LAG_WAIT_S:g} s after the writes stopped (counted at their wait: "
            f">= {LAG_WAIT_S:g} s)",
        )
    )
