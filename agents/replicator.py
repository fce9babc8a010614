"""The replicating agent: one ordered stream over the worker's partitions of the action topic.

`concurrency=1` keeps each partition in offset order (and avoids Faust's out-of-order commit
bugs #606/#316); events come in batches (`take_events`) and are split by partition. The body
never raises: Faust would ack and commit the batch. All failure handling is in
`ReplicationWork`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import faust

from journal.actions import RawRecord

if TYPE_CHECKING:
    from app.worker import WorkerContext

log = logging.getLogger(__name__)

BATCH_SIZE = 1000
BATCH_WITHIN_S = 0.01


def define_agent(app: faust.App, topic: Any, context: WorkerContext) -> Any:
    @app.agent(topic, name="replicate", concurrency=1)
    async def replicate(stream: Any) -> None:
        await context.started.wait()
        work = context.work
        assert work is not None
        async for events in stream.take_events(BATCH_SIZE, within=BATCH_WITHIN_S):
            by_partition: dict[int, list[tuple[object, RawRecord]]] = defaultdict(list)
            for event in events:
                by_partition[event.message.partition].append((event, _raw(event.message)))
            for partition, batch in by_partition.items():
                try:
                    # Faust picks a table write's partition from its "current event"; within
                    # take_events there is none, so the work sets it per journal.
                    await work.handle(partition, batch, stream._set_current_event)
                except Exception:
                    # handle() retries what can fail; this is a bug. Log it loudly: the batch
                    # is acked, but the store's pointer still lets the next owner catch up.
                    log.exception("replication batch of partition %s failed", partition)

    return replicate


def _raw(message: Any) -> RawRecord:
    return RawRecord(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp_ms=int(message.timestamp * 1000),
        key=message.key,
        value=message.value,
        headers=list(message.headers or ()),
    )
