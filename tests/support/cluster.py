"""A three-node Kafka cluster of the stack's (KJ_KAFKA_BROKERS=3) for one test, on free ports
in its own directory, and what its admin client says about it."""

from __future__ import annotations

from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from devtools.cluster import free_node_ports, three_nodes
from tests.support.eventually import eventually

__all__ = ["free_node_ports", "partition_replicas", "three_nodes"]


async def partition_replicas(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Each partition of `topic`: its leader's node id and its replicas' (-1: no leader)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:

        async def described() -> list[dict[str, Any]]:
            # the broker asked may not know a new topic's partitions yet: an empty list
            (answer,) = await admin.describe_topics([topic])
            assert answer["partitions"], f"{topic}'s partitions not known yet"
            return list(answer["partitions"])

        partitions = await eventually(described, f"{topic} described")
        return {p["partition"]: (p["leader"], p["replicas"]) for p in partitions}
    finally:
        await admin.close()
