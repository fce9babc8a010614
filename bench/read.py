"""Read (recovery) of a 100-event journal, against a raw Cassandra read plus one produce."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from bench.common import Row, Section, median, percentile, timed, unique
from bench.workload import events, raw_append
from journal.actions import record_headers
from journal.journals import Journals
from journal.model import MarkHeader
from journal.replicate import AlreadyQuarantined, replicate_to_now
from journal.store import cql
from journal.store.cassandra import CassandraStore

METHOD = (
    "One journal of 100 events (10 appends of 10) on a fresh 1-partition topic; a read is "
    "`[r async for r in journal.read()]` with the direct client, Mark included, all 100 events "
    "checked. Cases: (a) fully replicated (`replicate_to_now`); (b) an unreplicated head: the "
    "journal's last append (10 events) sits behind {head} records of other journals after the "
    "pointer; (c) replication stopped: {stopped} records of other journals after the pointer "
    "(the journal's last append behind them). Baseline: one acks=all produce to the partition "
    "concurrently with a raw prepared-statement read of the same 100 rows through the same "
    "driver session. {reps} reads per case after {warm} warm-up reads."
)


@dataclass(frozen=True, slots=True)
class ReadSizes:
    head_records: int
    stopped_records: int
    repetitions: int
    warmup: int = 3


async def _fill(producer: AIOKafkaProducer, topic: str, count: int) -> None:
    """`count` one-event Appends of other journals into partition 0, pipelined."""
    value, headers = raw_append(1, 1)
    chunk = 2000
    for start in range(0, count, chunk):
        sends = [
            await producer.send(
                topic, value, key=f"other-{n}".encode(), partition=0, headers=headers
            )
            for n in range(start, min(count, start + chunk))
        ]
        await asyncio.gather(*sends)


async def bench_read(journals: Journals, bootstrap: str, sizes: ReadSizes) -> Section:
    """`journals` must be on a fresh topic of one partition."""
    section = Section(
        "Read (recovery)",
        METHOD.format(
            head=f"{sizes.head_records - 1:,}",
            stopped=f"{sizes.stopped_records:,}",
            reps=sizes.repetitions,
            warm=sizes.warmup,
        ),
    )
    store = journals.replicated_store
    assert isinstance(store, CassandraStore)
    topic = journals.topic
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=512 * 1024,
    )
    await producer.start()
    try:
        ids = {case: unique(case) for case in ("replicated", "head", "stopped")}
        for journal_id in ids.values():
            for first in range(1, 91, 10):
                await journals.journal(journal_id).append(events(first, 10))
        await journals.journal(ids["replicated"]).append(events(91, 10))
        await replicate_to_now(bootstrap, store, topic, AlreadyQuarantined())

        rows_query = await asyncio.to_thread(
            store.session.prepare,
            f"SELECT seq_nr, partition, offset, timestamp, tags, payload_type, payload_txt, "
            f"payload_bin, expire_after, metadata, headers FROM {store.keyspace}.events "
            f"WHERE topic = ? AND id = ? AND segment = 0 AND seq_nr >= 1 AND seq_nr <= 100",
        )
        rows_query.fetch_size = 1000

        mark_headers = record_headers(MarkHeader("bench"), {})  # a real Mark: same bytes

        async def baseline() -> None:
            key = ids["replicated"]
            produced = producer.send_and_wait(
                topic, b"", key=key.encode(), partition=0, headers=mark_headers
            )
            rows, _ = await asyncio.gather(
                cql.execute(store.session, rows_query, (topic, key)), produced
            )
            assert len(rows) == 100, len(rows)

        def reader(journal_id: str) -> Callable[[], Awaitable[None]]:
            async def read() -> None:
                got = [r async for r in journals.journal(journal_id).read()]
                assert len(got) == 100, (journal_id, len(got))

            return read

        async def sample(operation: Callable[[], Awaitable[None]]) -> list[float]:
            for _ in range(sizes.warmup):
                await operation()
            return [await timed(operation) for _ in range(sizes.repetitions)]

        base = await sample(baseline)
        replicated = await sample(reader(ids["replicated"]))
        await _fill(producer, topic, sizes.head_records - 1)
        await journals.journal(ids["head"]).append(events(91, 10))
        head = await sample(reader(ids["head"]))
        await _fill(producer, topic, sizes.stopped_records)
        await journals.journal(ids["stopped"]).append(events(91, 10))
        stopped = await sample(reader(ids["stopped"]))
    finally:
        await producer.stop()

    base_p50 = percentile(base, 50)
    for label, samples in (
        ("baseline (produce + raw read)", base),
        ("replicated", replicated),
        (f"head of {sizes.head_records:,} records", head),
        (f"replication stopped, {sizes.stopped_records:,} records", stopped),
    ):
        section.samples[label] = samples
        is_base = label.startswith("baseline")
        goal, met = "", None
        if label == "replicated":
            goal, met = "p50 <= 1.5x baseline", percentile(samples, 50) <= 1.5 * base_p50
        if label.startswith("replication stopped"):
            goal, met = "p50 <= 50 ms", percentile(samples, 50) <= 50
        section.add(
            Row(
                f"{label}: p50",
                percentile(samples, 50),
                "ms",
                None if is_base else base_p50,
                goal,
                met,
                f"{min(samples):.3g}..{max(samples):.3g}",
            )
        )
        section.add(Row(f"{label}: p99", percentile(samples, 99), "ms"))
    section.notes.append(f"median of the baseline: {median(base):.1f} ms")
    return section
