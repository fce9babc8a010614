"""Writing to and reading from Kafka: producing actions (`producer`, `group_commit`, `writer`),
reading them (`consumers`, `records`, `keys`, `poison`, `tail`), the fence a read stops at
(`fence`), a head folded from them (`head`), the topic (`topic`), its ACLs (`acls`) and the
guard of its partition count (`guard`), and the one mapping of aiokafka's errors to the core's
(`driver_errors`). Replication and subscriptions, which read Kafka too, are rooms of their own
above this one (`journal.replication`, `journal.subscriptions`).

May import `journal.core`, `journal.codec`, `journal.store.base` (the store as indexes see it),
the shared modules (`errors`, `metrics`, `version`) and `kjconfig`; never `journal.client`,
`journal.replication` or `journal.subscriptions`. Nothing above `journal/` needs aiokafka's
errors: they end here.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

# the direct client's tail index, per partition it follows (`KJ_TAIL_MAX_JOURNALS`,
# `KJ_TAIL_FORGOTTEN_CAPACITY`: journal/kafka/tail.py): here, where the settings take them
# without loading a driver
DEFAULT_TAIL_MAX_JOURNALS = 10_000
DEFAULT_TAIL_FORGOTTEN_CAPACITY = 100_000
# a worker's scans of a partition from offset 0 with the store down, at once
# (`KJ_MAX_KAFKA_ONLY_SCANS`: journal/client/reading.py)
DEFAULT_MAX_KAFKA_ONLY_SCANS = 2
# how long a producer waits for Kafka's acknowledgement before the caller hears
# `KafkaUnavailable` (`KJ_KAFKA_ACK_TIMEOUT_S`: journal/kafka/producer.py): above a failover, as
# a node of three killed -9 held a partition's acks up to ~18 s here (the quorum leader's node:
# the controllers elect, then fence the broker after its 9 s session)
DEFAULT_ACK_TIMEOUT_S = 30.0

if TYPE_CHECKING:
    from journal.kafka.acls import (
        Acl,
        AclOperation,
        AclPattern,
        AclPermission,
        AclResource,
        create_acls,
        describe_acls,
    )
    from journal.kafka.consumers import raw_record, start_consumer, stop_consumer
    from journal.kafka.driver_errors import POISON_ERRORS
    from journal.kafka.fence import Fence
    from journal.kafka.guard import check_recorded
    from journal.kafka.poison import Skipped, decodable_from, fetch
    from journal.kafka.producer import COMPRESSION, MAX_BATCH_BYTES, JournalProducer
    from journal.kafka.seals import first_seal
    from journal.kafka.tail import TailConfig, TailIndex
    from journal.kafka.topic import (
        TopicSpec,
        cluster_replicas,
        end_offsets,
        ensure_topic,
        log_starts,
        partition_count,
        quarantine_spec,
        quarantine_topic,
    )
    from journal.kafka.writer import JournalWriter, partition_of

_DOOR = {
    "Acl": "acls",
    "AclOperation": "acls",
    "AclPattern": "acls",
    "AclPermission": "acls",
    "AclResource": "acls",
    "check_recorded": "guard",
    "COMPRESSION": "producer",
    "Fence": "fence",
    "JournalProducer": "producer",
    "JournalWriter": "writer",
    "MAX_BATCH_BYTES": "producer",
    "POISON_ERRORS": "driver_errors",
    "Skipped": "poison",
    "TailConfig": "tail",
    "TailIndex": "tail",
    "TopicSpec": "topic",
    "cluster_replicas": "topic",
    "create_acls": "acls",
    "decodable_from": "poison",
    "describe_acls": "acls",
    "end_offsets": "topic",
    "ensure_topic": "topic",
    "fetch": "poison",
    "first_seal": "seals",
    "log_starts": "topic",
    "partition_count": "topic",
    "partition_of": "writer",
    "quarantine_spec": "topic",
    "quarantine_topic": "topic",
    "raw_record": "consumers",
    "start_consumer": "consumers",
    "stop_consumer": "consumers",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "COMPRESSION",
    "DEFAULT_ACK_TIMEOUT_S",
    "DEFAULT_MAX_KAFKA_ONLY_SCANS",
    "DEFAULT_TAIL_FORGOTTEN_CAPACITY",
    "DEFAULT_TAIL_MAX_JOURNALS",
    "MAX_BATCH_BYTES",
    "POISON_ERRORS",
    "Acl",
    "AclOperation",
    "AclPattern",
    "AclPermission",
    "AclResource",
    "Fence",
    "JournalProducer",
    "JournalWriter",
    "Skipped",
    "TailConfig",
    "TailIndex",
    "TopicSpec",
    "check_recorded",
    "cluster_replicas",
    "create_acls",
    "decodable_from",
    "describe_acls",
    "end_offsets",
    "ensure_topic",
    "fetch",
    "first_seal",
    "log_starts",
    "partition_count",
    "partition_of",
    "quarantine_spec",
    "quarantine_topic",
    "raw_record",
    "start_consumer",
    "stop_consumer",
]
