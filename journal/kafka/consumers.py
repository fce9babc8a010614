"""The core's one way to make and stop an aiokafka consumer: assigned, never in a group.

Every consumer of the core (reads by offset, the tail index, high watermarks, catching up)
is unsubscribed (`group_id=None`): no rebalances, no commits; the store's pointers say what
is replicated. A driver failure to start is the core's `KafkaUnavailable`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from journal.codec.actions import RawRecord
from journal.kafka.driver_errors import KafkaError, core_error
from kjconfig.access import KafkaAccess


async def start_consumer(kafka: KafkaAccess, **options: Any) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(
        **kafka.client_options(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **options,
    )
    try:
        await consumer.start()
    except KafkaError as error:
        await stop_consumer(consumer)
        raise core_error(error, "cannot start a Kafka consumer") from error
    return consumer


async def log_start(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int:
    """The partition's first offset Kafka still holds."""
    try:
        starts = await consumer.beginning_offsets([tp])
    except KafkaError as error:
        raise core_error(error, f"{tp.topic}-{tp.partition}: no log start") from error
    start: int = starts[tp]
    return start


_STOP_RECHECK_S = 1.0  # a consumer's stop not done by then: its fetcher's cancel sent again


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """Stop it; aiokafka 0.14 lets a CancelledError of its own internal task escape when a
    consumer stops right after starting: swallow that one, never a cancellation of ours. And
    its fetcher can swallow the cancel the stop sends it (`cancel_fetch_again`), then wait
    forever: while the stop is not done, that cancel is sent again every `_STOP_RECHECK_S`."""
    stopping = asyncio.ensure_future(consumer.stop())
    try:
        while not (await asyncio.wait({stopping}, timeout=_STOP_RECHECK_S))[0]:
            cancel_fetch_again(consumer)
        await stopping
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            stopping.cancel()
            raise


def cancel_fetch_again(consumer: AIOKafkaConsumer) -> None:
    """The cancel of the consumer's fetch routine, again if it is still running: aiokafka
    0.14's routine suppresses a CancelledError while it cancels its own fetches after an
    assignment changed (fetcher.py, `with contextlib.suppress(asyncio.CancelledError): await
    task`), so the stop's cancel is lost if it comes then (a kept restore consumer stopped
    right after `assign([])`), and the routine waits for an assignment that never comes.
    The one user of the fetcher's private members (tests/test_private_hooks.py)."""
    fetcher = consumer._fetcher
    if fetcher is not None and not fetcher._fetch_task.done():
        fetcher._fetch_task.cancel()


def raw_record(message: ConsumerRecord[bytes, bytes]) -> RawRecord:
    """The RawRecord of a record an aiokafka consumer returned (no key/value deserializers)."""
    return RawRecord(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        timestamp_ms=message.timestamp,
        key=message.key,
        value=message.value,
        headers=list(message.headers),
    )
