"""Kafka's DescribeQuorum request (API 55, version 0), which aiokafka does not offer.

Contract: `describe_quorum(client)` sends it through a bootstrapped aiokafka client to any
broker (brokers forward it to the active controller) and returns the KRaft metadata quorum's
leader id and voter ids, or raises aiokafka's error for the code Kafka answers with. Version 0
is enough: it has the leader and the voters; later versions add timestamps and endpoints.
The schema is Kafka's DescribeQuorumRequest/Response.json, flexible from version 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from aiokafka.errors import for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

if TYPE_CHECKING:
    from aiokafka.client import AIOKafkaClient

_METADATA_TOPIC = "__cluster_metadata"  # the KRaft metadata log: one partition, 0
_REPLICA = (("replica_id", Int32), ("log_end_offset", Int64), ("tags", TaggedFields))


# aiokafka has no type information (pyproject: ignore_missing_imports): its bases are Any.
class DescribeQuorumResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 55
    API_VERSION = 0
    SCHEMA = Schema(
        ("error_code", Int16),
        (
            "topics",
            CompactArray(
                ("topic_name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("error_code", Int16),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("high_watermark", Int64),
                        ("current_voters", CompactArray(*_REPLICA)),
                        ("observers", CompactArray(*_REPLICA)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DescribeQuorumRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 55
    API_VERSION = 0
    RESPONSE_TYPE = DescribeQuorumResponse_v0
    SCHEMA = Schema(
        (
            "topics",
            CompactArray(
                ("topic_name", CompactString("utf-8")),
                ("partitions", CompactArray(("partition_index", Int32), ("tags", TaggedFields))),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


DescribeQuorumRequestStruct: TypeAlias = DescribeQuorumRequest_v0


class DescribeQuorumRequest(Request[DescribeQuorumRequestStruct]):  # type: ignore[misc]
    API_KEY = 55

    def build(
        self, request_struct_class: type[DescribeQuorumRequestStruct]
    ) -> DescribeQuorumRequestStruct:
        return request_struct_class([(_METADATA_TOPIC, [(0, {})], {})], {})


def _raise_for(code: int) -> None:
    if code != 0:
        raise for_code(code)(f"DescribeQuorum: error {code}")


async def describe_quorum(client: AIOKafkaClient) -> tuple[int, tuple[int, ...]]:
    """The metadata quorum's leader id and voter ids (see the module contract)."""
    response: Any = await client.send(client.get_random_node(), DescribeQuorumRequest())
    answer = response.to_object()
    _raise_for(answer["error_code"])
    (topic,) = answer["topics"]
    (partition,) = topic["partitions"]
    _raise_for(partition["error_code"])
    voters = tuple(sorted(v["replica_id"] for v in partition["current_voters"]))
    return partition["leader_id"], voters
