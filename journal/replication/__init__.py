"""Replication into the eventual store: the `Replicator` that folds a partition's records onto
the stored rows and moves the store's pointer (`replicate`), the quarantine of records that
cannot be replicated (`quarantine`), and replication's lag per partition (`lag`).

May import `journal.kafka`, `journal.store`, `journal.codec`, `journal.core` and the shared
modules; never `journal.client` or `journal.subscriptions`.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

if TYPE_CHECKING:
    from journal.replication.lag import PartitionLag, format_lag, lag_json, replication_lag
    from journal.replication.quarantine import (
        Quarantined,
        ReplayStep,
        list_quarantine,
        newest_quarantined,
        plan_replay,
        replay,
    )
    from journal.replication.replicate import (
        CACHED_JOURNALS,
        AlreadyQuarantined,
        CutRegistry,
        KafkaQuarantine,
        Quarantine,
        Replicator,
        StoredRows,
        replicate_range,
        replicate_to_now,
        wait_replicated,
    )
    from journal.replication.successor import (
        Predecessors,
        SuccessorReplication,
        WorkerTopic,
        predecessor_of,
        predecessors_of,
        undrained,
        worker_topic,
    )

_DOOR = {
    "CACHED_JOURNALS": "replicate",
    "AlreadyQuarantined": "replicate",
    "CutRegistry": "replicate",
    "KafkaQuarantine": "replicate",
    "PartitionLag": "lag",
    "Quarantine": "replicate",
    "Quarantined": "quarantine",
    "ReplayStep": "quarantine",
    "Replicator": "replicate",
    "StoredRows": "replicate",
    "Predecessors": "successor",
    "SuccessorReplication": "successor",
    "WorkerTopic": "successor",
    "worker_topic": "successor",
    "predecessor_of": "successor",
    "predecessors_of": "successor",
    "undrained": "successor",
    "format_lag": "lag",
    "lag_json": "lag",
    "list_quarantine": "quarantine",
    "newest_quarantined": "quarantine",
    "plan_replay": "quarantine",
    "replay": "quarantine",
    "replicate_range": "replicate",
    "replicate_to_now": "replicate",
    "replication_lag": "lag",
    "wait_replicated": "replicate",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "CACHED_JOURNALS",
    "AlreadyQuarantined",
    "CutRegistry",
    "KafkaQuarantine",
    "PartitionLag",
    "Predecessors",
    "Quarantine",
    "Quarantined",
    "ReplayStep",
    "Replicator",
    "StoredRows",
    "SuccessorReplication",
    "WorkerTopic",
    "format_lag",
    "lag_json",
    "list_quarantine",
    "newest_quarantined",
    "plan_replay",
    "predecessor_of",
    "predecessors_of",
    "replay",
    "replicate_range",
    "replicate_to_now",
    "replication_lag",
    "undrained",
    "wait_replicated",
    "worker_topic",
]
