"""`kafka-journal bench [--quick] [--out DIR]`: every scenario, then BENCHMARKS.md.

Full run: sizes fit ~30 minutes on a 2-core machine; `--quick` uses tiny sizes (under a
minute, no Spark) only to prove the harness works. Fresh topics and keyspaces every run; the
worker process it starts is stopped on the way out, whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from app.provision import stack_up
from bench.append import AppendSizes, bench_append, bench_compression, bench_contention
from bench.cluster import bench_cluster
from bench.common import Row, Section, load_average
from bench.console import console_section
from bench.consumer import bench_consumer
from bench.encryption import EncryptionSizes, bench_encryption
from bench.environment import connected, quiet_cassandra, settings_for, settle, worker
from bench.footprint import FootprintSizes, bench_footprint
from bench.huge import HUGE_APPEND_EVENTS, bench_huge
from bench.profile import host_busy_fraction, host_cpu_jiffies
from bench.read import ReadSizes, bench_offline, bench_offline_pile, bench_read, read_settings
from bench.recovery import RecoverySizes, bench_recovery
from bench.replication import (
    LAG_GOALS,
    LAG_WAIT_S,
    RAW_BATCH,
    LagPoint,
    ReplicationResults,
    ReplicationSizes,
    bench_spread_backlog,
    lag,
    profile_catch_up,
    quarantine_rate,
    raw_inserts,
    replicate_in_process,
    replicate_one_event_appends,
    replicate_one_event_appends_with_worker,
    replicate_with_worker,
    replication_rows,
    write_backlog,
)
from bench.replication import (
    METHOD as REPLICATION_METHOD,
)
from bench.report import RunInfo, write
from bench.spark import bench_spark, bench_spark_on_cluster
from bench.subscription import SubscriptionSizes, bench_subscription
from bench.tail_index import bench_tail_index
from devtools.workers import WorkerProcess
from journal import Journals
from journal.settings import Settings
from journal.store import CassandraStore
from stack import Stack

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Sizes:
    append: AppendSizes
    read: ReadSizes
    replication: ReplicationSizes
    huge_events: int
    consumer_repetitions: int
    spark_events: int  # 0: skip
    subscription: SubscriptionSizes
    tail_records: int  # the direct client's tail index: records it indexes
    recovery: RecoverySizes
    encryption: EncryptionSizes
    spread_events: int  # the backlog over 100 journals a fresh worker replicates
    console_loads: int = 10  # overview loads in the browser
    console_appends: int = 50  # appends timed into the live tail
    # the standalone Spark cluster against local[2]: fewer events than `spark_events` (one
    # worker of 1 GiB; the comparison, not the size, is the point)
    spark_cluster_events: int = 200_000
    # appends per repetition and repetitions on the three-node cluster (and on one node), and
    # kills of a partition's leader
    cluster_appends: int = 3200
    cluster_repetitions: int = 3
    cluster_kills: int = 2


FULL = Sizes(
    # c=64 repetitions last ~0.2-2 s each: seven of 4,800 appends, so that one noisy moment of
    # this shared host does not decide the median (three of 3,200 once spread 0.7-2.7x of it)
    AppendSizes(sequential=300, concurrent=4800, repetitions=7),
    ReadSizes(small_backlog=20_000, large_backlog=1_000_000, repetitions=100),
    ReplicationSizes(events=300_000, raw_rows=20_000, lag_seconds=10, malformed=300_000),
    huge_events=200_000,
    consumer_repetitions=10,
    spark_events=1_000_000,  # as issue 10 asks: ~1.5 min here
    subscription=SubscriptionSizes(events=100_000),
    tail_records=300_000,
    recovery=RecoverySizes(events=20_000, repetitions=5),
    encryption=EncryptionSizes(appends=12_800, recovery_events=20_000, repetitions=5),
    spread_events=100_000,
)
QUICK = Sizes(
    AppendSizes(sequential=20, concurrent=128, repetitions=1),
    ReadSizes(small_backlog=200, large_backlog=2000, repetitions=3, warmup=1),
    ReplicationSizes(events=2000, raw_rows=1000, lag_seconds=2, malformed=500),
    huge_events=3000,
    consumer_repetitions=3,
    # tiny, so the quick run proves the Spark harness end to end (Spark's start is ~30 s)
    spark_events=1000,
    subscription=SubscriptionSizes(events=2000, journals=20, repetitions=1, live=20, offered_s=1.0),
    tail_records=3000,
    recovery=RecoverySizes(events=500, repetitions=2),
    encryption=EncryptionSizes(appends=128, recovery_events=500, repetitions=1, reads=1, warmups=0),
    spread_events=2000,
    console_loads=2,
    console_appends=5,
    spark_cluster_events=0,  # tests/pipeline/test_cluster.py runs a standalone cluster already
    cluster_appends=128,
    cluster_repetitions=1,
    cluster_kills=1,
)
SCALING = [
    "the huge journal has {huge:,} events, not 1,000,000: writing and replicating 1,000,000 "
    "events of 300 bytes alone takes several minutes on 2 shared cores; memory growth is what "
    "it tests and a streaming read's memory does not grow with the journal's length",
    "replication throughput is measured on a {repl:,}-event backlog; raw INSERTs on {raw:,} rows",
    "Spark rebuild on {spark:,} events",
    "subscription throughput on {subscription:,} events over 8 partitions",
    "appends: {append_reps} repetitions of {concurrent:,} appends at c=64 (5 of 6,400 before: "
    "more repetitions, in a rotated order, for the same time)",
    "recovery: one journal of {recovery:,} events, {recovery_reps} reads of each kind; the spread "
    "backlog: {spread:,} events",
]


def _others() -> str:
    """What else runs: JVMs, pytest and pyspark processes, by count."""
    try:
        ps = subprocess.run(["ps", "-eo", "pcpu,args"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no ps)"
    lines = ps.stdout.splitlines()[1:]
    counts = {
        "java": sum(1 for line in lines if "java" in line.split(maxsplit=1)[-1][:200]),
        "pytest": sum(1 for line in lines if "pytest" in line),
        "pyspark": sum(1 for line in lines if "pyspark" in line),
    }
    busy = sorted(lines, key=lambda line: -float(line.split()[0] or 0))[:3]
    top = "; ".join(f"{line.split()[0]}% {line.split(maxsplit=1)[1][:60]}" for line in busy)
    return ", ".join(f"{name} x{n}" for name, n in counts.items()) + f" (top CPU: {top})"


def _machine() -> list[str]:
    memory = "?"
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            memory = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return [
        f"machine: {os.cpu_count()} cores ({cpu}), {memory} memory, {platform.platform()}",
        f"Python {platform.python_version()}; a pure-Python loop of 10,000,000 additions takes "
        f"{_python_loop_s():.2f} s here (best of 3, before the run): compare absolute rates "
        "between machines by it, ratios within a run",
    ]


def _python_loop_s() -> float:
    """Machines differ in Python speed, and the absolute goals (events/s, requests/s) move
    with them: a yardstick for the reader of two runs' rates."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return best


def _commit() -> str:
    """The checkout's commit, short, and "dirty" if its tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return f"{head} (dirty)" if changes else head


def _versions(servers: dict[str, str]) -> dict[str, str]:
    versions = dict(servers)
    for package in ("aiokafka", "faust-streaming", "cassandra-driver", "aiohttp", "pyspark"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _log(message: str) -> None:
    print(f"[bench {datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def _failed(title: str, error: BaseException) -> Section:
    """A scenario that could not finish: its section says so instead of failing the run."""
    _log(f"{title}: not measured: {error!r}")
    section = Section(title, "Not measured in this run: the scenario failed.")
    section.add(
        Row(
            "not measured in this run",
            float("nan"),
            "",
            note=f"{type(error).__name__}: {str(error)[:200]}",
        )
    )
    return section


async def _quiet(store: CassandraStore) -> float:
    """Let Cassandra finish compacting what the last scenario wrote: the seconds it took."""
    _log("waiting for Cassandra's compactions and flushes")
    return await quiet_cassandra(store)


def _quieted(section: Section, seconds: float) -> Section:
    section.notes.append(
        f"before it, Cassandra's background compactions and flushes of earlier scenarios were "
        f"let finish ({seconds:.0f} s)"
    )
    return section


async def _guarded(
    title: str, scenario: Awaitable[Section], quiet: CassandraStore | None = None
) -> Section:
    """Run `scenario` (not started yet); with `quiet`, once Cassandra is quiet (`_quiet`)."""
    waited = None if quiet is None else await _quiet(quiet)
    _log(title)
    started = time.monotonic()
    try:
        section = await scenario
    except Exception as error:  # a benchmark reports what it could not measure
        return _failed(title, error)
    section.seconds = time.monotonic() - started
    return section if waited is None else _quieted(section, waited)


async def _read_sections(
    base: Settings, sizes: Sizes, stack: Stack, workdir: Path
) -> list[Section]:
    """Reads and consumer costs, on 1-partition topics of their own."""
    settings = read_settings(settings_for(base, "read", partitions=1))
    async with connected(settings) as (journals, store):
        read = await _guarded(
            "Read (recovery)", bench_read(journals, store, settings, sizes.read), store
        )
        consumer = await _guarded(
            "Kafka consumer costs",
            bench_consumer(base.kafka_access(), settings.topic, sizes.consumer_repetitions),
            store,
        )
    offline = await _offline(base, sizes.read, stack, workdir)
    return [read, offline, consumer]


async def _offline(base: Settings, sizes: ReadSizes, stack: Stack, workdir: Path) -> Section:
    """Reads with Cassandra down, on a 1-partition topic of their own (it stops the stack's
    Cassandra, and starts it again)."""
    settings = settings_for(base, "offline", partitions=1)
    async with connected(settings) as (journals, store):
        process = worker(settings, workdir / "offline")
        process.start()
        try:
            return await _guarded(
                "Reads with Cassandra down",
                bench_offline(journals, store, process, stack, sizes),
                store,
            )
        finally:
            process.stop()


async def _replication(
    settings: Settings,
    journals: Journals,
    store: CassandraStore,
    worker: WorkerProcess,
    sizes: ReplicationSizes,
    profile: bool,
) -> Section:
    one_event = sizes.events // 2  # 1-event appends
    raw_batched = sizes.raw_rows * 5  # rows: batches cost the client less per row
    _log("replication: backlog")
    appends = await write_backlog(journals, sizes.events)
    _log("replication: worker")
    replication = Section(
        "Replication",
        REPLICATION_METHOD.format(
            events=appends * 10,
            appends=appends,
            raw=sizes.raw_rows,
            raw_batched=raw_batched,
            one_event=one_event,
            seconds=sizes.lag_seconds,
            lag_wait_s=LAG_WAIT_S,
        ),
    )
    quiet = await _quiet(store)
    worker_rate = await replicate_with_worker(settings, worker, store, replication)
    _log("replication: in-process and raw inserts")
    core_rate = await replicate_in_process(settings)
    raw_rate = await raw_inserts(settings, sizes.raw_rows)
    raw_batched_rate = await raw_inserts(settings, raw_batched, per_batch=RAW_BATCH)
    _log("replication: 1-event appends (a worker of their own, then in-process), quarantine")
    quiet += await _quiet(store)
    worker_one_event_rate, notes = await replicate_one_event_appends_with_worker(
        settings, store, worker.datadir.with_name("worker-one-event"), one_event
    )
    replication.notes += [f"1-event appends: {note}" for note in notes.notes]
    core_one_event_rate = await replicate_one_event_appends(settings, store, one_event)
    quarantine = await quarantine_rate(settings, sizes.malformed)
    quiet += await _quiet(store)
    _log("replication: lag")
    # issue 26: at fractions of the capacity this run measured, so they mean the same anywhere
    points = []
    for fraction in LAG_GOALS:
        target = max(100, round(fraction * worker_rate / 100) * 100)
        before = host_cpu_jiffies()
        lags = await lag(journals, store, target, sizes.lag_seconds)
        busy = host_busy_fraction(before, host_cpu_jiffies())
        points.append(LagPoint(fraction, target, lags.lags, lags.offered, busy, lags.unreplicated))
    results = ReplicationResults(
        worker_rate=worker_rate,
        worker_one_event_rate=worker_one_event_rate,
        core_rate=core_rate,
        core_one_event_rate=core_one_event_rate,
        raw_rate=raw_rate,
        raw_batched_rate=raw_batched_rate,
        lags=tuple(points),
        quarantine=quarantine,
    )
    replication_rows(replication, results)
    if profile:
        _log("replication: a profiled catch-up (its rate is not reported)")
        replication.profile = await profile_catch_up(
            settings, store, worker.datadir.with_name("worker-profiled"), sizes.events
        )
    _quieted(replication, quiet)  # before the worker, the 1-event worker and the lag, in all
    return replication


async def _worker_sections(
    base: Settings, sizes: Sizes, workdir: Path, profile: bool
) -> list[Section]:
    """Everything with a worker, on a 3-partition topic it serves."""
    settings = settings_for(base, "worker", partitions=3)
    async with connected(settings) as (journals, store):
        process = worker(settings, workdir / "worker")
        try:
            replication = await _guarded(
                "Replication",
                _replication(settings, journals, store, process, sizes.replication, profile),
            )
            try:  # the replication scenario stops the worker; a worker that cannot come
                # back fails the scenarios that need it, not the run
                if process.process is None:
                    process.start()
                await process.wait_ready()
            except Exception as error:
                titles = ("Append", "Huge journal over HTTP", "Recovery", "Console")
                append, huge, recovery, console = (_failed(title, error) for title in titles)
                return [append, replication, huge, recovery, console]
            append = await _guarded(
                "Append",
                bench_append(
                    journals,
                    base.kafka_access(),
                    str(process.url),
                    sizes.append,
                    settle=lambda: settle(settings, store),
                    profile=profile,
                    worker_pid=process.pid,
                ),
                store,
            )
            huge = await _guarded(
                "Huge journal over HTTP",
                bench_huge(journals, store, process, sizes.huge_events),
                store,
            )
            recovery = await _guarded(
                "Recovery",
                bench_recovery(journals, process, lambda: settle(settings, store), sizes.recovery),
                store,
            )
            console = await _guarded(
                "Console",
                console_section(process.url, sizes.console_loads, sizes.console_appends),
                store,
            )
            return [append, replication, huge, recovery, console]
        finally:
            process.stop()


async def _scenarios(
    base: Settings, sizes: Sizes, stack: Stack, workdir: Path, profile: bool
) -> list[Section]:
    read, offline, consumer = await _read_sections(base, sizes, stack, workdir)
    append, replication, huge, recovery, console = await _worker_sections(
        base, sizes, workdir, profile
    )
    spread_settings = settings_for(base, "spread", partitions=3)
    # the spread backlog's store; the later scenarios' Cassandra quiet is asked of it too
    store = await CassandraStore.connect(spread_settings.cassandra_config())
    try:
        spread = await _guarded(
            "Replication of a spread backlog",
            bench_spread_backlog(
                spread_settings,
                store,
                workdir / "worker-spread",
                sizes.spread_events,
                lambda: _quiet(store),
            ),
            store,
        )
        compression = await _guarded(
            "Append compression",
            bench_compression(
                settings_for(base, "compression", partitions=1),
                sizes.append.sequential,
                sizes.append.repetitions,
            ),
            store,
        )
        subscription = await _guarded(
            "Subscription", bench_subscription(base, sizes.subscription), store
        )
        tail = await _guarded("Tail index", bench_tail_index(base, sizes.tail_records), store)
        encryption = await _guarded(
            "Encrypted journals", bench_encryption(base, sizes.encryption), store
        )
        cluster = await _guarded(
            "Append on a three-node cluster",
            bench_cluster(
                base,
                workdir / "cluster",
                appends=sizes.cluster_appends,
                repetitions=sizes.cluster_repetitions,
                kills=sizes.cluster_kills,
            ),
            store,
        )
        if sizes.spark_events:
            spark = await _guarded(
                "Spark rebuild", bench_spark(settings_for(base, "spark"), sizes.spark_events), store
            )
        else:
            spark = Section("Spark rebuild", "Not run (no Spark events asked for).")
        if sizes.spark_events and sizes.spark_cluster_events:
            spark_cluster = await _guarded(
                "Spark rebuild on a standalone cluster",
                bench_spark_on_cluster(
                    settings_for(base, "spark_cluster"),
                    min(sizes.spark_events, sizes.spark_cluster_events),
                    workdir / "spark",
                ),
                store,
            )
        else:
            spark_cluster = Section("Spark rebuild on a standalone cluster", "Not run.")
    finally:
        await store.close()
    sections = [append, compression, encryption, read, recovery, offline, replication, spread]
    sections.append(huge)
    return [*sections, console, cluster, subscription, tail, spark, spark_cluster, consumer]


def _stack_up() -> tuple[Stack, Settings]:
    """The stack, started where it is not up, and the environment's settings pointed at it."""
    stack = Stack()
    stack_up(stack)
    base = Settings.from_env(
        kafka_bootstrap=stack.kafka_bootstrap,
        cassandra_hosts=",".join(stack.cassandra_hosts),
        cassandra_port=stack.cassandra_port,
    )
    return stack, base


def run(quick: bool, out: Path, profile: bool | None = None) -> int:
    sizes = QUICK if quick else FULL
    stack, base = _stack_up()
    servers = {status.name.capitalize(): status.version or "?" for status in stack.status()}
    load_before, others_before = load_average(), _others()
    machine = _machine()  # its yardstick timed before the servers are loaded
    commit = _commit()  # before the run writes BENCHMARKS.md into the tree
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        sections = asyncio.run(
            _scenarios(base, sizes, stack, Path(workdir), not quick if profile is None else profile)
        )
    seconds = time.monotonic() - started
    info = RunInfo(
        mode="quick" if quick else "full",
        commit=commit,
        date=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        machine=machine,
        versions=_versions(servers),
        load_before=load_before,
        load_after=load_average(),
        others_before=others_before,
        others_after=_others(),
        seconds=seconds,
        scaling=[
            line.format(
                huge=sizes.huge_events,
                repl=sizes.replication.events,
                raw=sizes.replication.raw_rows,
                spark=sizes.spark_events,
                subscription=sizes.subscription.events,
                append_reps=sizes.append.repetitions,
                concurrent=sizes.append.concurrent,
                recovery=sizes.recovery.events,
                recovery_reps=sizes.recovery.repetitions,
                spread=sizes.spread_events,
            )
            for line in SCALING
        ],
    )
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / "BENCHMARKS.md"
    write(sections, info, markdown, out / "docs" / "bench")
    _log(f"wrote {markdown} in {seconds / 60:.1f} min")
    return 0


def run_subscription(events: int, out: Path | None = None) -> int:
    """Only the subscription scenario (`--only subscription`), at `events` events; prints its
    rows (BENCHMARKS.md is left as the last full run wrote it)."""
    _, base = _stack_up()
    sizes = SubscriptionSizes(events=events, journals=max(2, min(100, events // 100)))
    section = asyncio.run(bench_subscription(base, sizes))
    for row in section.rows:
        ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x of {row.baseline:,.0f})"
        print(f"{row.name}: {row.value:,.1f} {row.unit}{ratio} {row.goal} {row.note}")
    return 0


def _host_now() -> tuple[tuple[float, float, float], str]:
    """The host's load average and the other processes on it, now."""
    return load_average(), _others()


def _print_with_load(section: Section, before: tuple[tuple[float, float, float], str]) -> None:
    """A scenario run alone: its method, its rows, and what else loaded the host before and
    after it (`before`: `_host_now()` as it started), the commit and the machine."""
    load_before, others_before = before
    print(section.method)
    _print_rows(section)
    loads = [", ".join(f"{n:.1f}" for n in load) for load in (load_before, load_average())]
    print(f"load average (1, 5, 15 min): before {loads[0]}; after {loads[1]}")
    print(f"other processes: before {others_before}; after {_others()}")
    print(f"commit {_commit()}; {_machine()[0]}")


def _print_rows(section: Section) -> None:
    for row in section.rows:
        ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x of {row.baseline:,.0f})"
        spread = f" (spread {row.spread})" if row.spread else ""
        value = f"{row.value:.2f}" if row.unit == "x" else f"{row.value:,.1f}"  # a ratio
        print(f"{row.name}: {value} {row.unit}{ratio}{spread} {row.goal} {row.note}")
    for note in section.notes:
        print(note)


def run_recovery(events: int, repetitions: int = 5) -> int:
    """Only the recovery scenario (`--recovery-only`), one journal of `events` on a 1-partition
    topic served by a worker of its own; prints its rows (BENCHMARKS.md is left as it is)."""
    _, base = _stack_up()
    settings = settings_for(base, "recovery", partitions=1)
    before = _host_now()

    async def measure(datadir: Path) -> Section:
        async with connected(settings) as (journals, store):
            process = worker(settings, datadir)
            process.start()
            try:
                await process.wait_ready()
                sizes = RecoverySizes(events=events, repetitions=repetitions)
                return await bench_recovery(
                    journals, process, lambda: settle(settings, store), sizes
                )
            finally:
                process.stop()

    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        _print_with_load(asyncio.run(measure(Path(workdir) / "worker")), before)
    return 0


def run_huge(events: int, per_append: int = HUGE_APPEND_EVENTS) -> int:
    """Only "Huge journal" (`--huge-only`, issue 42): one journal of `events` in Appends of
    `per_append` streamed over HTTP by a worker and read with the direct client, each reader's
    peak memory growth; prints the rows with the load."""
    _, base = _stack_up()
    before = _host_now()
    settings = settings_for(base, "huge", partitions=1).replace(
        segment_size=max(events + 1, 100_000)
    )

    async def measure(datadir: Path) -> Section:
        async with connected(settings) as (journals, store):
            process = worker(settings, datadir)
            process.start()
            try:
                await process.wait_ready()
                return await bench_huge(journals, store, process, events, per_append)
            finally:
                process.stop()

    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        _print_with_load(asyncio.run(measure(Path(workdir) / "huge")), before)
    return 0


def run_spread(events: int, journals: int = 100) -> int:
    """Only "Replication of a spread backlog" (`--spread-only`): a worker of its own replicating
    `events` over `journals` journals (one journal: on a 1-partition topic, as the recovery's),
    against raw INSERTs of Append rows of as many journals; prints its rows with the load."""
    _, base = _stack_up()
    settings = settings_for(base, "spread", partitions=1 if journals == 1 else 3)
    before = _host_now()

    async def measure(datadir: Path) -> Section:
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            return await bench_spread_backlog(
                settings, store, datadir, events, lambda: quiet_cassandra(store), journals
            )
        finally:
            await store.close()

    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        _print_with_load(asyncio.run(measure(Path(workdir) / "worker-spread")), before)
    return 0


def run_encryption(
    appends: int, events: int, repeated_padding: bool = False, control: bool = False
) -> int:
    """Only the encrypted-journals scenario (`--encryption-only`): `appends` appends at c=64
    and a recovery of `events` events, 5 pairs of repetitions and 15 of reads; prints its rows
    (with `control`, both sides plain: the bench's own fairness)."""
    _, base = _stack_up()
    sizes = EncryptionSizes(
        appends=appends,
        recovery_events=events,
        repetitions=5,
        reads=15,
        padding="repeated" if repeated_padding else "random",
        control=control,
    )
    before = _host_now()
    _print_with_load(asyncio.run(bench_encryption(base, sizes)), before)
    return 0


def run_partitions(counts: list[int]) -> int:
    """Only "What a partition costs" (`--partitions-only`): a worker, a rebalance and a direct
    client at each partition count, and one more partition's cost; prints the rows."""
    from bench.partitions import bench_partitions

    _, base = _stack_up()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        _print_rows(asyncio.run(bench_partitions(base, counts, Path(workdir))))
    return 0


def run_restore(journals: int, partitions: int = 1) -> int:
    """Only "A fresh worker's restore" (`--restore-only`): a worker's tables of `journals`
    entries over `partitions` restored by a fresh worker, against a bare consumer; prints the
    rows with the load."""
    from bench.restore import bench_restore

    _, base = _stack_up()
    before = _host_now()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(bench_restore(base, journals, Path(workdir), partitions))
    _print_with_load(section, before)
    return 0


def run_grow(journals: int) -> int:
    """Only "Growing the topic online" (`--grow-only`, issue 40): appends through a move from 3
    to 6 partitions against the same without one, and the move of a partition holding
    `journals` journals of ten records; prints the rows with the load."""
    from bench.grow import bench_grow

    _, base = _stack_up()
    before = _host_now()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(bench_grow(base, journals, Path(workdir)))
    _print_with_load(section, before)
    return 0


def run_rebalance(journals: int, partitions: int = 8) -> int:
    """Only "A rebalance's pause" (`--rebalance-only`): replication's lag while a second
    worker joins one whose tables hold `journals` journals over `partitions`; prints the rows
    with the load."""
    from bench.rebalance import bench_rebalance

    _, base = _stack_up()
    before = _host_now()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(bench_rebalance(base, journals, Path(workdir), partitions=partitions))
    _print_with_load(section, before)
    return 0


def run_scale(journals: int) -> int:
    """Only "At scale" (`--scale-only`, issue 43): `journals` journals on 32 partitions: a
    worker's and a direct client's memory, a fresh worker's restore and start to serving, a
    rebalance's pause; prints its rows with the load before and after."""
    from bench.scale import bench_scale

    _, base = _stack_up()
    before = _host_now()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(bench_scale(base, journals, Path(workdir)))
    _print_with_load(section, before)
    return 0


def run_scale_tables(journals: int) -> int:
    """Only "At scale: the tables alone" (`--scale-tables-only`, issue 43): `journals`
    journals' table entries written straight into a worker's changelogs, 32 partitions; a
    fresh worker's restore of them against a bare consumer, its RSS; prints its rows with the
    load before and after."""
    from bench.scale_tables import bench_scale_tables

    _, base = _stack_up()
    before = _host_now()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(bench_scale_tables(base, journals, Path(workdir)))
    _print_with_load(section, before)
    return 0


def run_listing(journals: int, buckets: int, samples: int) -> int:
    """Only "Listing at scale" (`--listing-only`, issue 41): `journals` ids written straight
    into a fresh keyspace's `journal_ids` (and a baseline keyspace of 100,000 first), then the
    prefix pages', the pointers read's and the partitions' numbers (with `buckets` other than
    32: the listing at that count, against the same journals at 32); prints them with the load
    (each keyspace is dropped after: point KJ_STACK_DIR at a stack of your own)."""
    from bench.listing import bench_listing

    stack, base = _stack_up()
    before = _host_now()
    section = asyncio.run(
        bench_listing(base, stack.settings.data_dir, journals, _log, buckets, samples)
    )
    _print_with_load(section, before)
    return 0


def run_footprint(events: int, journals: int) -> int:
    """Only the footprint (`--footprint-only`): the bytes an event and a journal cost on Kafka's
    and Cassandra's disks (one long journal of `events`, `journals` of one event); prints them."""
    stack, base = _stack_up()
    sizes = FootprintSizes(events=events, journals=journals)
    _print_rows(asyncio.run(bench_footprint(base, stack.settings.data_dir, sizes)))
    return 0


def run_contention(out: Path) -> int:
    """Only the append section's contention rows (`--contention-only`), against a worker of
    their own; prints them (BENCHMARKS.md is left as the last full run wrote it)."""
    _, base = _stack_up()
    settings = settings_for(base, "contention", partitions=3)

    async def measure() -> Section:
        process = worker(settings, out / ".bench-contention" / "worker")
        process.start()
        try:
            await process.wait_ready()
            return await bench_contention(str(process.url))
        finally:
            process.stop()

    for row in asyncio.run(measure()).rows:
        ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x of {row.baseline:,.0f})"
        print(f"{row.name}: {row.value:,.1f} {row.unit}{ratio} {row.goal} {row.note}")
    return 0


def run_offline(large_backlog: int) -> int:
    """Only "Reads with Cassandra down" (`--offline-only`), at 20,000 and `large_backlog` other
    records; prints its rows. It stops and starts the stack's Cassandra: point KJ_STACK_DIR and
    the KJ_* ports at a stack of its own where others use the default one."""
    stack, base = _stack_up()
    sizes = ReadSizes(small_backlog=20_000, large_backlog=large_backlog, repetitions=30)
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(_offline(base, sizes, stack, Path(workdir)))
    for row in section.rows:
        met = "" if row.met is None else (" met" if row.met else " NOT met")
        print(f"{row.name}: {row.value:,.1f} {row.unit} {row.goal}{met} {row.note}")
    for note in section.notes:
        print(note)
    return 0


def run_tls(appends: int, fresh: bool) -> int:
    """Only "TLS" (`--tls-only`): the environment's stack must be the TLS one (KJ_SECURITY=true
    KJ_TLS=true, a KJ_STACK_DIR of its own); a plain twin is started beside it for the run and
    stopped after. With `fresh` (`--fresh-stacks`) both stacks are stopped and their Kafka and
    Cassandra data deleted first, so that both start cold together with nothing in them: the
    ratios followed the two stacks' ages and contents as much as TLS (BENCHMARKS.md). Prints
    the rows."""
    from bench.tls import TlsSizes, bench_tls, plain_twin

    tls = Stack()
    if tls.settings.tls != "on":
        raise SystemExit("--tls-only runs on the TLS stack: KJ_SECURITY=true KJ_TLS=true")
    plain = Stack(plain_twin(tls.settings), tie_to_parent=True)
    if fresh:
        for stack in (tls, plain):
            stack.down()
            for server_data in ("kafka", "cassandra"):  # certificates and secrets are kept
                shutil.rmtree(stack.settings.data_dir / server_data, ignore_errors=True)
    stack_up(tls)
    stack_up(plain)
    try:
        with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
            stacks = {"plain": plain, "tls": tls}
            sizes = TlsSizes(appends=appends, http_appends=min(appends, 6400))
            section = asyncio.run(bench_tls(stacks, Path(workdir), sizes))
    finally:
        plain.down(only_started=True)
    for row in section.rows:
        ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x of {row.baseline:,.0f})"
        print(f"{row.name}: {row.value:,.1f} {row.unit}{ratio} {row.goal} {row.spread}")
    for note in section.notes:
        print(note)
    return 0


def run_cassandra_cluster(events: int) -> int:
    """Only "Cassandra: three nodes against one" (`--cassandra-cluster-only`): the environment's
    stack is the one-node side (point KJ_STACK_DIR and the KJ_* ports at a stack of your own on
    a shared machine); its three-node Cassandra twin is started for the run (unless up) and
    stopped after. Prints the rows and the load average before and after."""
    from bench.cassandra_cluster import CassandraClusterSizes, bench_cassandra_cluster

    one, base = _stack_up()
    three = Stack(one.settings.cassandra_cluster_twin(), tie_to_parent=True)
    three.up()
    load_before = load_average()
    try:
        cassandras = {"1 node": one.settings, "3 nodes": three.settings}
        sizes = CassandraClusterSizes(events=events)
        section = asyncio.run(bench_cassandra_cluster(base, cassandras, sizes))
    finally:
        three.down(only_started=True)
    print(section.method)
    for row in section.rows:
        ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x of {row.baseline:,.4g})"
        print(f"{row.name}: {row.value:,.4g} {row.unit}{ratio} {row.note}")
    loads = [", ".join(f"{n:.1f}" for n in load) for load in (load_before, load_average())]
    for note in section.notes:
        print(note)
    print(f"load average (1, 5, 15 min): before {loads[0]}; after {loads[1]}")
    print(f"other processes: {_others()}")
    return 0


def run_offline_pile(pile: int) -> int:
    """Only "Reads with Cassandra down, right after a pile" (`--offline-pile`, issue 43): a
    pile of `pile` records, read from the moment it is written; prints its rows. It stops and
    starts the stack's Cassandra: point KJ_STACK_DIR and the KJ_* ports at a stack of its own
    where others use the default one."""
    stack, base = _stack_up()
    with tempfile.TemporaryDirectory(prefix="kj-bench-") as workdir:
        section = asyncio.run(_offline_pile(base, pile, stack, Path(workdir)))
    for row in section.rows:
        met = "" if row.met is None else (" met" if row.met else " NOT met")
        ratio = "" if row.ratio is None else f" ({row.ratio:.2f}x of {row.baseline:,.0f})"
        print(f"{row.name}: {row.value:,.1f} {row.unit}{ratio} {row.goal}{met} {row.note}")
    return 0


async def _offline_pile(base: Settings, pile: int, stack: Stack, workdir: Path) -> Section:
    settings = settings_for(base, "offline_pile", partitions=1)
    async with connected(settings) as (journals, store):
        process = worker(settings, workdir / "offline_pile")
        process.start()
        try:
            return await bench_offline_pile(journals, store, process, stack, pile)
        finally:
            process.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-journal bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: prove the harness")
    parser.add_argument("--out", type=Path, default=REPO, help="where BENCHMARKS.md goes")
    parser.add_argument(
        "--subscription-only",
        type=int,
        metavar="EVENTS",
        default=None,
        help="run only the subscription scenario at this many events; print its numbers",
    )
    parser.add_argument(
        "--contention-only",
        action="store_true",
        help="run only the append section's contention rows (issue 27); print them",
    )
    parser.add_argument(
        "--offline-only",
        type=int,
        metavar="RECORDS",
        default=None,
        help="run only the reads with Cassandra down, at 20,000 and this many other records "
        "(it stops the stack's Cassandra); print its numbers",
    )
    parser.add_argument(
        "--tls-only",
        type=int,
        metavar="APPENDS",
        default=None,
        help="run only TLS against the same without, at this many appends per repetition "
        "(on the TLS stack; it starts a plain twin beside it); print its numbers",
    )
    parser.add_argument(
        "--fresh-stacks",
        action="store_true",
        help="with --tls-only: stop the TLS stack and its plain twin and delete their Kafka and "
        "Cassandra data first (certificates and secrets kept), so both start cold and empty",
    )
    parser.add_argument(
        "--encryption-only",
        type=int,
        nargs=2,
        metavar=("APPENDS", "EVENTS"),
        default=None,
        help="run only the encrypted-journals scenario (APPENDS at c=64, a recovery of EVENTS); "
        "print its numbers",
    )
    parser.add_argument(
        "--repeated-padding",
        action="store_true",
        help="with --encryption-only: pad events with one letter repeated (the older workload, "
        "which lz4 compresses for the plain side only) instead of random letters",
    )
    parser.add_argument(
        "--encryption-control",
        action="store_true",
        help="with --encryption-only: both sides plain, to check that the bench favours neither "
        "(its ratios should be ~1.0x)",
    )
    parser.add_argument(
        "--restore-only",
        type=int,
        metavar="JOURNALS",
        default=None,
        help="run only a fresh worker's restore of tables holding this many journals, against "
        "a bare consumer of the changelogs; print its numbers",
    )
    parser.add_argument(
        "--on-partitions",
        type=int,
        metavar="N",
        default=None,
        help="with --restore-only or --rebalance-only: a topic of N partitions (default 1 and "
        "8: at 32, many short changelogs)",
    )
    parser.add_argument(
        "--grow-only",
        type=int,
        metavar="JOURNALS",
        default=None,
        help="run only growing the topic online: appends through a move from 3 to 6 partitions "
        "against none, and the move of a partition holding this many journals of ten records; "
        "print its numbers",
    )
    parser.add_argument(
        "--rebalance-only",
        type=int,
        metavar="JOURNALS",
        default=None,
        help="run only a rebalance's pause: a second worker joins one whose tables hold this "
        "many journals, under paced appends; print its numbers",
    )
    parser.add_argument(
        "--partitions-only",
        type=int,
        nargs="+",
        metavar="COUNT",
        default=None,
        help="run only what a partition costs: a worker's start-up and memory, a rebalance and "
        "a direct client's, at each of these partition counts (two or more); print its numbers",
    )
    parser.add_argument(
        "--footprint-only",
        type=int,
        nargs=2,
        metavar=("EVENTS", "JOURNALS"),
        default=None,
        help="run only the footprint: the bytes an event and a journal cost on Kafka's and "
        "Cassandra's disks (one journal of EVENTS, JOURNALS of one event); print its numbers",
    )
    parser.add_argument(
        "--scale-only",
        type=int,
        metavar="JOURNALS",
        default=None,
        help="run only the scale scenario: this many journals on 32 partitions; a worker's and "
        "a direct client's memory, a fresh worker's restore and start, a rebalance's pause; "
        "print its numbers",
    )
    parser.add_argument(
        "--scale-tables-only",
        type=int,
        metavar="JOURNALS",
        default=None,
        help="run only the scale of the tables alone: this many journals' table entries written "
        "straight into a worker's changelogs (32 partitions, no action records); a fresh "
        "worker's restore of them against a bare consumer, its memory; print its numbers",
    )
    parser.add_argument(
        "--listing-only",
        type=int,
        metavar="JOURNALS",
        default=None,
        help="run only the listing at scale: this many journals' ids written straight into "
        "journal_ids, then prefix pages, pointers reads and the largest partition, projected to "
        "10^9 journals; print its numbers",
    )
    parser.add_argument(
        "--listing-buckets",
        type=int,
        metavar="N",
        default=32,
        help="with --listing-only: the listing's bucket count (a power of two, 64 or more, "
        "against the same journals over 32 in the same run; default 32)",
    )
    parser.add_argument(
        "--listing-samples",
        type=int,
        metavar="N",
        default=500,
        help="with --listing-only: timed operations a series (default 500; fewer for a quick "
        "look on a loaded host: a page over 512 buckets costs ~16 times one over 32)",
    )
    parser.add_argument(
        "--cassandra-cluster-only",
        type=int,
        metavar="EVENTS",
        default=None,
        help="run only replication and reads on a three-node Cassandra against one node, "
        "replicating this many events per side (it starts the stack's three-node Cassandra "
        "twin beside it); print its numbers",
    )
    parser.add_argument(
        "--recovery-only",
        type=int,
        metavar="EVENTS",
        default=None,
        help="run only the recovery scenario, one journal of this many events; print its numbers",
    )
    parser.add_argument(
        "--huge-only",
        type=int,
        metavar="EVENTS",
        default=None,
        help="run only the huge journal: this many events streamed over HTTP and read with the "
        "direct client, each reader's peak memory growth; print its numbers",
    )
    parser.add_argument(
        "--huge-append-events",
        type=int,
        metavar="N",
        default=HUGE_APPEND_EVENTS,
        help=f"with --huge-only: events per Append (default {HUGE_APPEND_EVENTS:,}; issue 42's "
        "recovery appends 10)",
    )
    parser.add_argument(
        "--spread-only",
        type=int,
        metavar="EVENTS",
        default=None,
        help="run only the replication of a backlog of this many events over 100 journals "
        "(--backlog-journals); print its numbers",
    )
    parser.add_argument(
        "--backlog-journals",
        type=int,
        metavar="N",
        default=100,
        help="with --spread-only: the journals the backlog is written to in turn (default 100; "
        "1: one journal on a 1-partition topic, issue 42's backlog)",
    )
    parser.add_argument(
        "--offline-pile",
        type=int,
        metavar="RECORDS",
        default=None,
        help="run only the reads with Cassandra down right after a pile of this many records "
        "(it stops the stack's Cassandra); print its numbers",
    )
    args = parser.parse_args(argv)
    if args.cassandra_cluster_only is not None:
        return run_cassandra_cluster(args.cassandra_cluster_only)
    if args.tls_only is not None:
        return run_tls(args.tls_only, args.fresh_stacks)
    if args.encryption_only is not None:
        appends, events = args.encryption_only
        return run_encryption(appends, events, args.repeated_padding, args.encryption_control)
    if args.footprint_only is not None:
        return run_footprint(*args.footprint_only)
    if args.grow_only is not None:
        return run_grow(args.grow_only)
    if args.rebalance_only is not None:
        return run_rebalance(args.rebalance_only, args.on_partitions or 8)
    if args.restore_only is not None:
        return run_restore(args.restore_only, args.on_partitions or 1)
    if args.scale_only is not None:
        return run_scale(args.scale_only)
    if args.scale_tables_only is not None:
        return run_scale_tables(args.scale_tables_only)
    if args.listing_only is not None:
        return run_listing(args.listing_only, args.listing_buckets, args.listing_samples)
    if args.partitions_only is not None:
        return run_partitions(args.partitions_only)
    if args.recovery_only is not None:
        return run_recovery(args.recovery_only)
    if args.huge_only is not None:
        return run_huge(args.huge_only, args.huge_append_events)
    if args.spread_only is not None:
        return run_spread(args.spread_only, args.backlog_journals)
    if args.offline_pile is not None:
        return run_offline_pile(args.offline_pile)
    if args.contention_only:
        return run_contention(args.out)
    if args.offline_only is not None:
        return run_offline(args.offline_only)
    if args.subscription_only is not None:
        return run_subscription(args.subscription_only, args.out)
    return run(args.quick, args.out)


if __name__ == "__main__":
    sys.exit(main())
