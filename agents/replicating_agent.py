"""The replicating agent: one ordered stream over the worker's partitions of the action topic.

`concurrency=1` keeps each partition in offset order (and avoids Faust's out-of-order commit
bugs #606/#316). Events are handled one by one, each as Faust's current event, because table
writes take their partition from it; `take_events` is not used: in faust-streaming 0.15.3 the
events it hands over do not always match the records of the batch (seen here: one record
twice, its neighbour never). Batching for the store happens behind, in `WorkerReplication`.
The body never raises: Faust would ack and commit.
"""

from __future__ import annotations

import logging
from typing import Any

import faust

from agents.replication import WorkerReplication
from journal.client import Deferred
from journal.codec import RawRecord

log = logging.getLogger(__name__)


def define_replicating_agent(
    app: faust.App, topic: Any, replication: Deferred[WorkerReplication]
) -> Any:
    """The agent; it starts handling records once `replication` is there (the worker
    connected)."""

    @app.agent(topic, name="replicate", concurrency=1)
    async def replicate(stream: Any) -> None:
        handler = await replication.wait()
        async for event in stream.events():
            try:
                message = event.message
                await handler.handle(_raw(message), app.consumer.highwater(message.tp))
            except Exception:
                # handle() retries what can fail; this is a bug. Log it loudly: the event
                # is acked, but the store's pointer still lets the next owner catch up.
                log.exception("replicating %s failed", event.message)

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
