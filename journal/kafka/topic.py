"""Creating the action topic (and its quarantine) and learning its partition count."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from journal.errors import SetupMissing
from journal.kafka.driver_errors import KafkaError, core_error, kafka_denied
from kjconfig.access import KafkaAccess, refuse_plaintext_to_tls
from kjconfig.hosts import bootstrap_addresses

_TOPIC_ALREADY_EXISTS = 36
_UNKNOWN_TOPIC = 3
_NOT_AUTHORIZED = (29, 31)  # topic, cluster authorization failed


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic as `ensure_topic` creates it; None replication settings come from the cluster
    (`replication_for`)."""

    name: str
    partitions: int
    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    compacted: bool = False  # a table's changelog: compacted, kept for ever (no retention)


def replication_for(spec: TopicSpec, brokers: int) -> tuple[int, int]:
    """The replication factor and min ISR `spec` gets on a cluster of `brokers` live brokers:
    its own, or else min(3, brokers) replicas, of which 2 must be in sync when there are 3
    (one broker may fail without stopping acks=all writes), else 1."""
    replicas = spec.replication_factor or min(3, brokers)
    return replicas, spec.min_insync_replicas or (2 if replicas >= 3 else 1)


def quarantine_topic(topic: str) -> str:
    """Where malformed records of `topic` are set aside, unchanged, for a person to look at."""
    return f"{topic}.quarantine"


def quarantine_spec(topic: str, replication_factor: int | None) -> TopicSpec:
    """The quarantine of `topic` as it is created: one partition (a person reads it)."""
    return TopicSpec(quarantine_topic(topic), 1, replication_factor)


async def ensure_topic(kafka: KafkaAccess, spec: TopicSpec, timeout_s: float = 30.0) -> int:
    """Create the topic unless it exists; return its partition count once all have leaders.

    Its replication comes from `replication_for` and the brokers the cluster lists now (live
    ones: a topic created while a broker of three is down gets two replicas).
    An existing topic keeps its own settings: its partition count is what counts. A principal
    without the Create right (security on: an administrator creates the topics) uses the
    topic if it exists, and gets `KafkaAccessDenied` naming the right if it does not.
    """
    admin = AIOKafkaAdminClient(**kafka.client_options())
    try:
        await admin.start()
    except KafkaError as error:  # the first contact of most processes: the core's error
        await admin.close()
        if kafka.tls is None:  # a TLS-only broker closes on a plaintext client: say so
            addresses = bootstrap_addresses(kafka.bootstrap)
            await asyncio.to_thread(refuse_plaintext_to_tls, addresses)
        raise core_error(error, f"cannot reach Kafka at {kafka.bootstrap}") from error
    try:
        brokers = len((await admin.describe_cluster())["brokers"])
        replicas, min_insync = replication_for(spec, brokers)
        response = await admin.create_topics(
            [
                NewTopic(
                    spec.name,
                    spec.partitions,
                    replicas,
                    topic_configs={
                        "min.insync.replicas": str(min_insync),
                        **(
                            {"cleanup.policy": "compact"}
                            if spec.compacted
                            else {"retention.ms": str(spec.retention_ms)}
                        ),
                    },
                )
            ]
        )
        may_create = True
        for name, code, *rest in response.topic_errors:
            if code in _NOT_AUTHORIZED:
                may_create = False
            elif code not in (0, _TOPIC_ALREADY_EXISTS):
                message = rest[0] if rest else ""
                raise SetupMissing(f"cannot create topic {name}: error {code} {message}")
        return await asyncio.wait_for(
            _partitions_with_leaders(admin, kafka, spec.name, may_create), timeout_s
        )
    finally:
        await admin.close()


async def cluster_replicas(kafka: KafkaAccess, spec: TopicSpec) -> int:
    """The replication factor `ensure_topic` gives `spec` on the cluster as it is now: for the
    topics other code creates beside it (Faust's table changelogs)."""
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:
        brokers = len((await admin.describe_cluster())["brokers"])
    finally:
        await admin.close()
    return replication_for(spec, brokers)[0]


async def end_offsets(kafka: KafkaAccess, topic: str, partitions: int) -> dict[int, int]:
    """The offset the next record of each partition will get."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def log_starts(kafka: KafkaAccess, topic: str, partitions: int) -> dict[int, int]:
    """The offset of the first record Kafka still holds of each partition (retention's or
    `delete_records`' start; the end offset when it holds none)."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        starts = await consumer.beginning_offsets(tps)
        return {tp.partition: offset for tp, offset in starts.items()}
    finally:
        await consumer.stop()


async def partition_count(kafka: KafkaAccess, topic: str, timeout_s: float = 30.0) -> int:
    """The partition count of an existing topic, once all its partitions have leaders."""
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:
        return await asyncio.wait_for(
            _partitions_with_leaders(admin, kafka, topic, may_create=False), timeout_s
        )
    finally:
        await admin.close()


async def _partitions_with_leaders(
    admin: AIOKafkaAdminClient, kafka: KafkaAccess, topic: str, may_create: bool
) -> int:
    while True:
        (described,) = await admin.describe_topics([topic])
        partitions = described["partitions"]
        if described["error_code"] in _NOT_AUTHORIZED:
            # Kafka does not tell a principal without Describe whether the topic exists
            unknown = "" if may_create else " (if it exists: an administrator creates topics)"
            raise kafka_denied(kafka, f"Describe on topic {topic}{unknown}")
        if described["error_code"] == _UNKNOWN_TOPIC and not may_create:
            raise kafka_denied(kafka, f"Create on topic {topic} (it does not exist)")
        if (
            described["error_code"] == 0
            and partitions
            and all(p["leader"] >= 0 for p in partitions)
        ):
            return len(partitions)
        await asyncio.sleep(0.1)
