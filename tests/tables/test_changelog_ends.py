"""A worker's tables ask their changelogs' end offsets through one kept consumer (real Kafka):
the same answers as a consumer per ask, for topics made after it started too, and after
`close` still an answer."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from bench.common import unique
from journal.kafka import TopicSpec, end_offsets, ensure_topic
from kjconfig.access import KafkaAccess
from stack import Stack
from tables.store import SharedChangelogEnds

pytestmark = pytest.mark.integration


async def _topic_with(kafka: KafkaAccess, records: dict[int, int]) -> str:
    """A fresh topic of 2 partitions holding `records` records in each partition named."""
    topic = unique("changelog_ends")
    await ensure_topic(kafka, TopicSpec(topic, 2))
    producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
    await producer.start()
    try:
        for partition, count in records.items():
            for _ in range(count):
                await producer.send_and_wait(topic, b"v", key=b"k", partition=partition)
    finally:
        await producer.stop()
    return topic


async def test_one_kept_consumer_answers_every_table_as_a_consumer_per_ask(stack: Stack) -> None:
    kafka = stack.settings.kafka_access
    ends = SharedChangelogEnds(kafka)
    try:
        first = await _topic_with(kafka, {0: 3, 1: 1})
        assert await ends(first, 2) == {0: 3, 1: 1} == await end_offsets(kafka, first, 2)
        consumer = ends._consumer
        assert consumer is not None
        # a topic made after the consumer started (a table's changelog created later)
        later = await _topic_with(kafka, {1: 2})
        assert await ends(later, 2) == {0: 0, 1: 2}
        assert ends._consumer is consumer  # kept: not one started per ask
    finally:
        await ends.close()
    assert ends._consumer is None
    assert await ends(first, 2) == {0: 3, 1: 1}  # asked while stopping: still answered
