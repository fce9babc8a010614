"""A three-node Kafka of the stack (KJ_KAFKA_BROKERS=3) keeps acknowledged records, and
takes new ones, when the leader of their partition is killed -9."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from journal.kafka.topic import TopicSpec, ensure_topic
from stack import KafkaCluster
from tests.support.cluster import three_nodes
from tests.support.eventually import eventually
from tests.support.harness import unique

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

# Kafka fences a silent broker after broker.session.timeout.ms (9 s), then elects new leaders
FAILOVER_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KafkaCluster]:
    with three_nodes(tmp_path / "stack") as nodes:
        yield nodes


async def _partition_state(bootstrap: str, topic: str) -> tuple[int, list[int], list[int], str]:
    """Partition 0's leader, replicas and in-sync replicas, and the topic's min ISR."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:

        async def described() -> dict[str, Any]:
            # a broker other than the controller may not know a new topic's partitions yet
            (answer,) = await admin.describe_topics([topic])
            assert answer["partitions"], f"{topic}'s partitions not known yet"
            return dict(answer)

        (partition,) = (await eventually(described, f"{topic} described"))["partitions"]
        (configs,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        (resource,) = configs.to_object()["resources"]
        (min_isr,) = [
            entry["config_value"]
            for entry in resource["config_entries"]
            if entry["config_names"] == "min.insync.replicas"
        ]
        return partition["leader"], partition["replicas"], partition["isr"], min_isr
    finally:
        await admin.close()


async def test_records_acked_by_all_survive_the_leaders_kill_9_and_writes_go_on(
    cluster: KafkaCluster,
) -> None:
    bootstrap = cluster.settings.kafka_bootstrap
    assert len(bootstrap.split(",")) == 3, "clients get every broker"
    topic = unique("cluster")
    # the project's own topic creation: replication from the cluster, not from a constant
    assert await ensure_topic(cluster.settings.kafka_access, TopicSpec(topic, 1)) == 1
    leader, replicas, isr, min_isr = await _partition_state(bootstrap, topic)
    assert (sorted(replicas), sorted(isr), min_isr) == ([1, 2, 3], [1, 2, 3], "2")

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", retry_backoff_ms=200)
    await producer.start()
    try:
        first = await producer.send_and_wait(topic, b"before the kill", key=b"k")
        (killed,) = [node for node in cluster.nodes if node.node.node_id == leader]
        killed.kill9()
        assert killed.pid() is None
        second = await asyncio.wait_for(
            producer.send_and_wait(topic, b"after the kill", key=b"k"), FAILOVER_S
        )
    finally:
        await producer.stop()
    assert (first.partition, second.partition) == (0, 0)
    assert second.offset == first.offset + 1

    new_leader, _, isr_after, _ = await _partition_state(bootstrap, topic)
    assert new_leader in set(replicas) - {leader}
    assert leader not in isr_after and len(isr_after) == 2

    status = await asyncio.to_thread(cluster.status)
    assert not status.healthy
    assert [node.healthy for node in status.nodes] == [
        node.node.node_id != leader for node in cluster.nodes
    ]
    facts = dict(status.facts)
    assert facts["quorum"].endswith("voters 1, 2, 3"), facts
    assert facts["replicas"] != "0 partition(s) under-replicated", facts

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        values: list[bytes | None] = []

        async def both_read() -> bool:
            for batch in (await consumer.getmany(partition, timeout_ms=1000)).values():
                values.extend(record.value for record in batch)
            assert len(values) >= 2, values
            return True

        await eventually(both_read, "both records read back", interval_s=0)
        assert values == [b"before the kill", b"after the kill"]
    finally:
        await consumer.stop()
