"""The Kafka consumer's three costs that decide read latency: create, seek, first poll."""

from __future__ import annotations

import time

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.common import Row, Section, median, percentile, spread
from journal.access import KafkaAccess

METHOD = (
    "On a partition holding at least a few thousand records: create and start an "
    "AIOKafkaConsumer (no group: assign, never subscribe, as the head reader does), assign "
    "the partition and seek to 1,000 records before its end, then poll (`getmany`) until a "
    "batch arrives (aiokafka's seek only sets the position: the fetch is paid by the first "
    "poll). {reps} repetitions, each with a fresh consumer; the medians and p99."
)


async def bench_consumer(kafka: KafkaAccess, topic: str, repetitions: int) -> Section:
    section = Section("Kafka consumer costs", METHOD.format(reps=repetitions))
    create: list[float] = []
    seek: list[float] = []
    first_poll: list[float] = []
    tp = TopicPartition(topic, 0)
    for _ in range(repetitions + 1):  # the first is a warm-up
        started = time.perf_counter()
        consumer = AIOKafkaConsumer(
            **kafka.client_options(), group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        created = time.perf_counter()
        try:
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            seek_started = time.perf_counter()
            consumer.seek(tp, max(0, end - 1000))
            sought = time.perf_counter()
            while not await consumer.getmany(tp, timeout_ms=1000):
                pass
            polled = time.perf_counter()
        finally:
            await consumer.stop()
        create.append((created - started) * 1000)
        seek.append((sought - seek_started) * 1000)
        first_poll.append((polled - sought) * 1000)
    for label, samples in (
        ("create + start", create),
        ("assign + seek", seek),
        ("first poll with data", first_poll),
    ):
        samples = samples[1:]
        section.samples[label] = samples
        section.add(Row(f"{label}: median", median(samples), "ms", spread=spread(samples)))
        section.add(Row(f"{label}: p99", percentile(samples, 99), "ms"))
    return section
