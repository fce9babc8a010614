"""The listing and the pointers at scale (issue 41, "Cassandra as it runs in production"): N
journals' ids written straight into `journal_ids` (not through Kafka), then what a prefix page
and a pointers read cost, and how large the largest Cassandra partition of `journal_ids` is,
projected linearly to 10^9 journals (the goal: at most 100 MB a partition).

Only `journal_ids` is written: a store's page of ids reads nothing else (journal/store/id_pages.py;
the `journals` rows are one Cassandra partition per journal, small whatever the count). Ids are
shaped like real ones, a prefix and a UUID, under five prefixes of very different sizes. The
pointers are those of a topic of `PARTITIONS` partitions, its count recorded as a process
records it, so a pointers read is the one a worker's listing page makes.

The partition's size is measured two ways, on the node's files and by Cassandra itself (the
stack runs without JMX, so `nodetool tablestats` does not answer):
- the uncompressed length of the table's SSTable data (`Data.db`), read from each SSTable's
  `CompressionInfo.db`, once the memtables are flushed and compaction is done: a partition's
  size is its bytes in that data, the size Cassandra's partition warnings speak of; over the
  rows written (each id once), the bytes a row; times the rows of the largest bucket;
- `system_views.max_partition_size`: Cassandra's largest partition among the table's SSTables,
  in MiB rounded up, from each SSTable's histogram of partition sizes (whose buckets are ~20%
  apart: an upper bound, and per SSTable, so it misses a partition spread over two levels).
"""

from __future__ import annotations

import asyncio
import math
import random
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Row, Section, percentile
from bench.environment import settings_for
from bench.footprint import flushed
from journal.client import DEFAULT_LIMIT
from journal.core import bucket_numbers, listing_bucket
from journal.errors import StoreUnavailable
from journal.settings import Settings
from journal.store import (
    BUCKETS,
    CassandraStore,
    Statements,
    execute,
)

# The ids' prefixes and their shares of every 10,000 journals: one common, one rare (1 in 10,000)
PREFIXES: tuple[tuple[str, int], ...] = (
    ("order-", 6000),
    ("customer-", 2500),
    ("cart-", 1000),
    ("invoice-", 499),
    ("refund-", 1),
)
CYCLE = sum(share for _, share in PREFIXES)
COMMON, RARE = PREFIXES[0][0], PREFIXES[-1][0]
PARTITIONS = 64  # the topic's: the worked example of docs/capacity.md picks 64
ROWS_PER_BATCH = 100  # ids of one bucket per unlogged batch: one Cassandra partition, one mutation
WRITE_WINDOW = 64  # batches in flight
WRITE_TRIES = 3  # a batch is idempotent (stamped): sent again after a timeout
STAMP = 1  # USING TIMESTAMP of every row: each id is written once
BASELINE = 100_000  # journals of the same run's baseline keyspace
SAMPLES = 500  # timed operations per series
WARMUP = 20  # untimed operations before each series
PROJECTED = 10**9  # journals the partition size is projected to
GOAL_BYTES = 100 * 10**6  # the largest partition at PROJECTED journals, at most (MB = 10^6 B)
MIB = 2**20

METHOD = (
    "A fresh keyspace, and {journals:,} journal ids written straight into `journal_ids` as "
    "replication lists them (the store's own prepared insert, `listing_bucket`'s bucket, "
    "{buckets} buckets: a topic's listing recorded at that count unless 32), not through "
    "Kafka: ids are a prefix and a random UUID "
    "(`order-` 60%, `customer-` 25%, `cart-` 10%, `invoice-` 5%, `refund-` 0.01%), in unlogged "
    f"batches of {ROWS_PER_BATCH} ids of one bucket, {WRITE_WINDOW} batches in flight; and the "
    f"pointers of a topic of {PARTITIONS} partitions (its count recorded). Then the memtables "
    "are flushed and compaction let finish, and each series is timed one operation at a time, "
    f"{{samples}} operations after {WARMUP} untimed: the store's prefix page of {DEFAULT_LIMIT} "
    "ids (the API's default page; one slice per bucket, merged: journal/store/id_pages.py) "
    "from a random depth of the common prefix (after = the prefix and 4 random hex digits), "
    "paging through the common prefix from its start (each page after the last), paging "
    "through the rare prefix (again from its start at its end); one bucket's slice of "
    f"{DEFAULT_LIMIT} ids alone (the raw read a page fans out); and the store's pointers read "
    f"(the {PARTITIONS} partitions' rows, 32 in flight).{{baseline}} The largest "
    "partition: rows by the writer's count per bucket (the largest checked by a COUNT), bytes "
    "as the uncompressed SSTable data per row written times those rows, and Cassandra's own "
    "`system_views.max_partition_size`; projected linearly to 10^9 journals (the largest "
    "bucket's share of the journals kept)."
)


def prefix_of(n: int) -> str:
    """The prefix of the `n`th journal written: `PREFIXES`' shares of every `CYCLE`."""
    position = n % CYCLE
    for prefix, share in PREFIXES:
        if position < share:
            return prefix
        position -= share
    raise AssertionError("the shares cover the cycle")


def prefix_count(count: int, prefix: str) -> int:
    """How many of the first `count` journals have `prefix` (`prefix_of`)."""
    cycles, rest = divmod(count, CYCLE)
    start = 0
    for name, share in PREFIXES:
        if name == prefix:
            return cycles * share + min(share, max(0, rest - start))
        start += share
    return 0


def journal_ids(count: int, seed: int) -> Iterator[str]:
    """`count` ids like real ones, a prefix and a UUID (version 4), the same for a seed."""
    rng = random.Random(seed)
    for n in range(count):
        yield prefix_of(n) + str(uuid.UUID(int=rng.getrandbits(128), version=4))


def bucket_batches(
    ids: Iterator[str], size: int, buckets: int = BUCKETS
) -> Iterator[tuple[int, list[str]]]:
    """The ids grouped by `journal_ids` bucket number (in the generation of `buckets`), at
    most `size` a group (one Cassandra partition a batch), taken lazily: a group goes when
    full, the rest at the end."""
    pending: dict[int, list[str]] = {}
    for journal_id in ids:
        bucket = listing_bucket(journal_id, buckets)
        group = pending.setdefault(bucket, [])
        group.append(journal_id)
        if len(group) == size:
            yield bucket, pending.pop(bucket)
    yield from sorted(pending.items())


def uncompressed_length(info: bytes) -> int:
    """The uncompressed length of an SSTable's data, from its `CompressionInfo.db`: the
    compressor's name, its options, the chunk length, (the largest compressed chunk, in the
    formats of Cassandra 4.0 on), the data's length and the chunk count, then the chunks'
    offsets. Both layouts are tried; the one whose chunk count fits the length (or one more)
    and whose offsets end the file is taken (ValueError: neither)."""
    (name,) = struct.unpack_from(">H", info, 0)
    position = 2 + name
    (options,) = struct.unpack_from(">i", info, position)
    position += 4
    for _ in range(2 * options):  # keys and values
        (text,) = struct.unpack_from(">H", info, position)
        position += 2 + text
    (chunk,) = struct.unpack_from(">i", info, position)
    position += 4
    for skip in (4, 0):
        at = position + skip
        if chunk <= 0 or at + 12 > len(info):
            continue
        length, chunks = struct.unpack_from(">qi", info, at)
        # a compaction's SSTable may end with one chunk more than its length needs (seen on
        # 5.0.9: 14,815 chunks for 14,814 of data)
        needed = -(-length // chunk)
        if needed <= chunks <= needed + 1 and len(info) == at + 12 + 8 * chunks:
            return int(length)
    raise ValueError(
        f"not a CompressionInfo.db of a layout this knows ({len(info)} bytes, chunk {chunk}, "
        f"header {info[: position + 16].hex()})"
    )


def data_bytes(stack_dir: Path, keyspace: str, table: str) -> int:
    """The uncompressed SSTable data of one copy of `table` (the mean over the nodes holding
    the keyspace), from the SSTables' `CompressionInfo.db` files."""
    totals: dict[Path, int] = {}
    for path in stack_dir.rglob("*-CompressionInfo.db"):
        directory = path.parent
        if directory.parent.name == keyspace and directory.name.rsplit("-", 1)[0] == table:
            node = directory.parent
            try:
                length = uncompressed_length(path.read_bytes())
            except (ValueError, struct.error) as error:
                raise ValueError(f"{path.name}: {error}") from error
            totals[node] = totals.get(node, 0) + length
    return sum(totals.values()) // max(1, len(totals))


@dataclass(frozen=True, slots=True)
class Partitions:
    """`journal_ids`' Cassandra partitions at `journals` journals: the rows of each bucket,
    the table's uncompressed data (one copy) and its bytes on disk (every component)."""

    journals: int
    rows: tuple[int, ...]
    data_bytes: int
    disk_bytes: int

    @property
    def largest_rows(self) -> int:
        return max(self.rows)

    @property
    def mean_rows(self) -> float:
        return sum(self.rows) / len(self.rows)

    @property
    def bytes_per_row(self) -> float:
        return self.data_bytes / sum(self.rows)

    @property
    def largest_bytes(self) -> float:
        return self.largest_rows * self.bytes_per_row

    @property
    def mean_bytes(self) -> float:
        return self.data_bytes / len(self.rows)

    def projected_largest(self, journals: int = PROJECTED, buckets: int | None = None) -> float:
        """The largest partition at `journals` over `buckets` (default: today's count): linear
        in the journals, the largest bucket keeping its share of them (its excess over the
        mean shrinks as buckets fill, so this errs high)."""
        buckets = len(self.rows) if buckets is None else buckets
        return self.largest_bytes * journals / self.journals * len(self.rows) / buckets

    def buckets_for(self, goal_bytes: int = GOAL_BYTES, journals: int = PROJECTED) -> int:
        """The fewest buckets whose largest partition stays within `goal_bytes` at `journals`."""
        return math.ceil(self.projected_largest(journals, 1) / goal_bytes)


@dataclass(frozen=True, slots=True)
class Measured:
    """One keyspace's run: its write, the timed series (ms), its partitions, Cassandra's own
    largest partition (MiB, rounded up; None: the virtual table did not answer)."""

    journals: int
    write_s: float
    latencies: dict[str, list[float]]
    partitions: Partitions
    cassandra_max_mib: int | None
    rare: int  # journals of the rare prefix


SERIES = {  # a series' key, its name in the table
    "deep": f"a prefix page of {DEFAULT_LIMIT}, the common prefix ({COMMON}), at a random depth",
    "through": f"a prefix page of {DEFAULT_LIMIT}, paging through the common prefix",
    "rare": f"a prefix page of {DEFAULT_LIMIT}, paging through the rare prefix ({RARE})",
    "slice": f"one bucket's slice of {DEFAULT_LIMIT} ids (raw)",
    "pointers": f"a pointers read, {PARTITIONS} partitions",
}


def power_of_two_above(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def section_of(measured: Measured, baseline: Measured | None) -> Section:
    """The table: each series' p50 and p99 against the baseline keyspace's, the write rate, the
    partitions at this size and projected to 10^9 journals."""
    buckets = len(measured.partitions.rows)
    # the bucket counts are named where the two keyspaces' differ (a page's fan-out measured)
    other = baseline is not None and len(baseline.partitions.rows) != buckets
    base_at = ""
    if baseline:
        base_at = f"{baseline.journals:,} journals" + (
            f", {len(baseline.partitions.rows)} buckets" if other else ""
        )
    section = Section(
        "Listing at scale",
        METHOD.format(
            journals=measured.journals,
            buckets=buckets,
            samples=len(measured.latencies["deep"]),
            baseline=(
                f" The same is measured on a baseline keyspace of {base_at} first, in the same run."
                if baseline
                else ""
            ),
        ),
    )
    at = f"{measured.journals:,} journals" + (f", {buckets} buckets" if other else "")
    for key, name in SERIES.items():
        samples = measured.latencies[key]
        base = baseline.latencies[key] if baseline else None
        section.samples[f"{name}, {at}"] = samples
        for q in (50, 99):
            section.add(
                Row(
                    f"{name}, {at}: p{q}",
                    percentile(samples, q),
                    "ms",
                    baseline=percentile(base, q) if base else None,
                    note=f"baseline: {base_at}" if baseline else "",
                )
            )
    rate = measured.journals / measured.write_s
    section.throughputs["journal_ids rows written"] = rate
    section.add(Row(f"writing {at}' ids", rate, "rows/s", note=f"{measured.write_s:.0f} s"))
    parts = measured.partitions
    section.add(Row(f"journal_ids, {at}: rows of the largest partition", parts.largest_rows, ""))
    section.add(Row(f"journal_ids, {at}: rows of a partition, mean", parts.mean_rows, ""))
    section.add(Row(f"journal_ids, {at}: a row, uncompressed", parts.bytes_per_row, "B"))
    section.add(Row(f"journal_ids, {at}: the largest partition", parts.largest_bytes / 10**6, "MB"))
    section.add(Row(f"journal_ids, {at}: a partition, mean", parts.mean_bytes / 10**6, "MB"))
    section.add(
        Row(
            f"journal_ids, {at}: a partition on disk, mean (compressed, every component)",
            parts.disk_bytes / len(parts.rows) / 10**6,
            "MB",
        )
    )
    cassandra = measured.cassandra_max_mib
    section.add(
        Row(
            f"journal_ids, {at}: Cassandra's max_partition_size",
            float("nan") if cassandra is None else cassandra,
            "MiB",
            note="rounded up; a histogram bucket's bound",
        )
    )
    projected = parts.projected_largest()
    goal_mb = GOAL_BYTES // 10**6
    section.add(
        Row(
            f"journal_ids at 10^9 journals, {len(parts.rows)} buckets: the largest partition",
            projected / 10**6,
            "MB",
            goal=f"<= {goal_mb} MB",
            met=projected <= GOAL_BYTES,
            note="projected linearly",
        )
    )
    needed = parts.buckets_for()
    section.add(
        Row(
            f"journal_ids at 10^9 journals: buckets for a partition <= {goal_mb} MB",
            needed,
            "",
            note=f"the power of two above: {power_of_two_above(needed)}",
        )
    )
    section.notes.append(f"{measured.rare:,} journals of the rare prefix")
    return section


async def _write(
    store: CassandraStore,
    statements: Statements,
    topic: str,
    journals: int,
    seed: int,
    buckets: int,
) -> list[int]:
    """Write `journals` ids into `journal_ids` over `buckets` buckets, `WRITE_WINDOW` batches
    in flight: the rows of each bucket (by its index in the generation)."""
    session = store.keyspace_access.session
    rows = [0] * buckets
    first = bucket_numbers(buckets).start

    async def tried(batch: Any) -> None:
        for attempt in range(WRITE_TRIES):
            try:
                await execute(session, batch)
                return
            except StoreUnavailable:  # a node busy compacting: the same stamped rows again
                if attempt == WRITE_TRIES - 1:
                    raise

    def requests() -> Iterator[tuple[Any, None]]:
        for bucket, ids in bucket_batches(journal_ids(journals, seed), ROWS_PER_BATCH, buckets):
            rows[bucket - first] += len(ids)
            batch = statements.batch()
            for journal_id in ids:
                batch.add(statements.list_id, (topic, bucket, journal_id, STAMP))
            yield batch, None

    # lanes of their own rather than the store's window (`cql.execute_in_window`), which gives
    # up at the first timeout: a batch is retried here
    lanes = requests()

    async def lane() -> None:
        for batch, _ in lanes:  # shared: each batch goes to the first free lane
            await tried(batch)

    await asyncio.gather(*(lane() for _ in range(WRITE_WINDOW)))
    return rows


async def _timed_series(
    operation: Callable[[], Awaitable[object]], count: int = SAMPLES
) -> list[float]:
    for _ in range(WARMUP):
        await operation()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await operation()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _paging(store: CassandraStore, topic: str, prefix: str) -> Callable[[], Awaitable[object]]:
    """Each call the next page of `prefix`, from its start again after its last."""
    after: list[str | None] = [None]

    async def page() -> None:
        ids = await store.journal_ids(topic, prefix, after[0], DEFAULT_LIMIT)
        after[0] = ids[-1] if len(ids) == DEFAULT_LIMIT else None

    return page


async def _series(
    store: CassandraStore,
    statements: Statements,
    topic: str,
    rng: random.Random,
    buckets: int,
    samples: int,
) -> dict[str, list[float]]:
    session = store.keyspace_access.session
    numbers = bucket_numbers(buckets)

    async def deep() -> None:
        after = COMMON + f"{rng.getrandbits(16):04x}"
        await store.journal_ids(topic, COMMON, after, DEFAULT_LIMIT)

    async def one_slice() -> None:
        after = COMMON + f"{rng.getrandbits(16):04x}"
        bound = statements.ids(True, True).bind(
            (topic, rng.choice(numbers), after, COMMON[:-1] + chr(ord(COMMON[-1]) + 1))
        )
        bound.fetch_size = DEFAULT_LIMIT
        await execute(session, bound)

    async def pointers() -> None:
        await store.pointers(topic)

    return {
        "deep": await _timed_series(deep, samples),
        "through": await _timed_series(_paging(store, topic, COMMON), samples),
        "rare": await _timed_series(_paging(store, topic, RARE), samples),
        "slice": await _timed_series(one_slice, samples),
        "pointers": await _timed_series(pointers, samples),
    }


async def _cassandra_max_mib(store: CassandraStore, keyspace: str) -> int | None:
    try:
        rows = await execute(
            store.keyspace_access.session,
            "SELECT mebibytes FROM system_views.max_partition_size "
            "WHERE keyspace_name = %s AND table_name = 'journal_ids'",
            (keyspace,),
        )
    except StoreUnavailable:  # a version without the virtual table
        return None
    return int(rows[0].mebibytes) if rows else None


async def _data_bytes(stack_dir: Path, keyspace: str, log: Callable[[str], None]) -> int | None:
    """`data_bytes` of `journal_ids`, read again while a file is still being written (a
    compaction's, whose CompressionInfo.db comes last); None if one stays unreadable."""
    for _ in range(30):  # a bound: 30 s
        try:
            return data_bytes(stack_dir, keyspace, "journal_ids")
        except (ValueError, struct.error) as error:
            failure = error
        await asyncio.sleep(1)  # a file being written, not a condition to wait on
    log(f"the SSTables' data length could not be read: {failure}")
    return None


async def measure(
    base: Settings,
    stack_dir: Path,
    journals: int,
    log: Callable[[str], None],
    buckets: int = BUCKETS,
    samples: int = SAMPLES,
) -> Measured:
    """Write `journals` ids over `buckets` buckets and the pointers into a fresh keyspace,
    flush, measure; the keyspace is dropped after (its disk)."""
    settings = settings_for(base, "listing", partitions=PARTITIONS)
    store = await CassandraStore.connect(settings.cassandra_config())
    access = store.keyspace_access
    try:
        statements = await asyncio.to_thread(
            Statements, access.session, access.keyspace, access.write_level
        )
        topic = settings.topic
        await store.recorded_partitions(topic, PARTITIONS)
        if buckets != BUCKETS:  # the topic's listing at that count, as a grow leaves it
            await execute(
                access.session,
                f"UPDATE {access.keyspace}.listing_buckets SET current = %s WHERE topic = %s",
                (buckets, topic),
            )
        for partition in range(PARTITIONS):
            await store.save_pointer(topic, partition, journals // PARTITIONS)
        log(f"writing {journals:,} ids")
        started = time.monotonic()
        rows = await _write(store, statements, topic, journals, journals, buckets)
        write_s = time.monotonic() - started
        log(f"written in {write_s:.0f} s ({journals / write_s:,.0f} rows/s); flushing")
        tables = await flushed(store, stack_dir, access.keyspace)
        largest = max(range(buckets), key=rows.__getitem__)
        counted = await execute(
            access.session,
            f"SELECT COUNT(*) AS n FROM {access.keyspace}.journal_ids "
            "WHERE topic = %s AND bucket = %s",
            (topic, bucket_numbers(buckets)[largest]),
            timeout_s=300,
        )
        if counted[0].n != rows[largest]:
            raise RuntimeError(f"bucket {largest}: {counted[0].n} rows, {rows[largest]} written")
        cassandra_max = await _cassandra_max_mib(store, access.keyspace)
        data = await _data_bytes(stack_dir, access.keyspace, log)
        if data is None and cassandra_max is not None:  # Cassandra's bound, per row written
            data = round(cassandra_max * MIB * journals / rows[largest])
            log("the bytes are Cassandra's max_partition_size's, not the SSTables' data")
        partitions = Partitions(journals, tuple(rows), data or 0, tables.get("journal_ids", 0))
        log("timing pages and pointers")
        rng = random.Random(journals)
        latencies = await _series(store, statements, topic, rng, buckets, samples)
        rare = prefix_count(journals, RARE)
        return Measured(journals, write_s, latencies, partitions, cassandra_max, rare)
    finally:
        await execute(access.session, f"DROP KEYSPACE IF EXISTS {access.keyspace}", timeout_s=120)
        await store.close()


async def bench_listing(
    base: Settings,
    stack_dir: Path,
    journals: int,
    log: Callable[[str], None],
    buckets: int = BUCKETS,
    samples: int = SAMPLES,
) -> Section:
    """The baseline keyspace, then `journals` over `buckets`. The baseline: with `buckets`
    other than 32, the same journals over 32 buckets (what a page's fan-out costs); else
    `BASELINE` journals, when fewer than `journals`."""
    if buckets != BUCKETS:
        baseline: Measured | None = await measure(base, stack_dir, journals, log, BUCKETS, samples)
    elif journals > BASELINE:
        baseline = await measure(base, stack_dir, BASELINE, log, BUCKETS, samples)
    else:
        baseline = None
    measured = await measure(base, stack_dir, journals, log, buckets, samples)
    return section_of(measured, baseline)
