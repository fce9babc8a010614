"""A three-node Kafka cluster of the stack's (KJ_KAFKA_BROKERS=3) for one test, on free ports
in its own directory, and what its admin client says about it."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient

from devtools.cluster import free_node_ports, three_nodes

__all__ = ["free_node_ports", "partition_replicas", "three_nodes"]


async def partition_replicas(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Each partition of `topic`: its leader's node id and its replicas' (-1: no leader)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        return {p["partition"]: (p["leader"], p["replicas"]) for p in described["partitions"]}
    finally:
        await admin.close()
