"""Poison batches under Faust (see journal.kafka.poison): the worker's consumer goes past them.

In faust-streaming 0.15.3 the aiokafka driver lets the consumer's UnsupportedCodecError or
CorruptRecordException out of `Consumer._drain_messages`, which logs "Drain messages raised"
and crashes the fetcher service: the worker stops consuming for good, and a restarted one
meets the same batch. aiokafka also drops, with the error, the records of other partitions
that the same call had drained (their positions had moved already).

`guarded_transport` is Faust's aiokafka transport with two changes to the consumer thread: a
shorter fetch wait (`AGENT_FETCH_MAX_WAIT_MS`), and its fetch guarded. Positions are noted
before each fetch; when one fails, it is redone partition by partition with a probe consumer
(`journal.kafka.poison.fetch`): the records it gets, up to the poison batch, are handed over,
and the partition moves past them and past the batch, so every failure moves on. The agent sees
a gap, as after compaction; the store's pointer passes it with the next record of the
partition. The batch is counted and logged once; its records cannot be decoded, so nothing of
them reaches the agent. What was skipped is handed to the agent (`SkippedBatches`:
this runs in Faust's consumer thread), which quarantines a marker of it before the store's
pointer can pass the batch (agents/replication.py).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka

from journal.kafka import POISON_ERRORS, Skipped, decodable_from, fetch

log = logging.getLogger(__name__)

_PROBE_TIMEOUT_MS = 500
# Faust fixes its consumer's fetch_max_wait_ms at 1500. aiokafka keeps one fetch in flight per
# broker, and a partition drained while it is in flight joins only the next one: a record
# waited up to 1.5 s (0.47 s on average under 64 conditional appenders) before the agent
# saw it, and conditional appends and reads wait for the agent. An idle fetch costs little.
AGENT_FETCH_MAX_WAIT_MS = 50


class SkippedBatches:
    """Poison batches the consumer thread went past, until the agent takes them (a deque's
    append and popleft are safe between threads)."""

    def __init__(self) -> None:
        self._skipped: deque[Skipped] = deque()

    def put(self, skipped: Skipped) -> None:
        self._skipped.append(skipped)

    def take(self) -> list[Skipped]:
        if not self._skipped:  # nearly always: the agent asks before every record
            return []
        taken: list[Skipped] = []
        while self._skipped:
            taken.append(self._skipped.popleft())
        return taken


# Private hooks (faust-streaming 0.15.3, aiokafka 0.14.0; neither offers a public way): the
# thread's `_create_worker_consumer` and `_fetch_records`, the consumer's `_new_consumer_thread`
# (overridden), `set_fetch_max_wait` and `_positions`. tests/test_private_hooks.py fails if an
# upgrade changes what they rely on.


class _GuardedThread(faust_aiokafka.AIOKafkaConsumerThread):  # type: ignore[misc]
    def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
        consumer: AIOKafkaConsumer = super()._create_worker_consumer(transport)
        set_fetch_max_wait(consumer, AGENT_FETCH_MAX_WAIT_MS)
        return consumer

    async def _fetch_records(
        self,
        consumer: AIOKafkaConsumer,
        active_partitions: set[TopicPartition],
        timeout: float | None = None,  # noqa: ASYNC109 (Faust's signature)
        max_records: int | None = None,
    ) -> Any:
        before = _positions(consumer)
        try:
            return await super()._fetch_records(
                consumer, active_partitions, timeout=timeout, max_records=max_records
            )
        except POISON_ERRORS:
            transport = self.transport
            conf = self.app.conf
            probe = AIOKafkaConsumer(
                bootstrap_servers=faust_aiokafka.server_list(transport.url, transport.default_port),
                # the login of Faust's own consumers (SASL with security on)
                **faust_aiokafka.credentials_to_aiokafka_auth(
                    conf.broker_credentials, conf.ssl_context
                ),
                group_id=None,
                fetch_max_wait_ms=20,
                # fetches as large as the failed one, so the batch is met again
                max_partition_fetch_bytes=self.app.conf.consumer_max_fetch_size,
            )
            await probe.start()
            try:
                return await _past_poison(consumer, probe, before, transport.skipped)
            finally:
                await probe.stop()


def set_fetch_max_wait(consumer: AIOKafkaConsumer, ms: int) -> None:
    """Give a consumer not yet started another `fetch_max_wait_ms` (Faust fixes it at 1500 in
    the consumer it makes): aiokafka keeps the argument as `_fetch_max_wait_ms` and hands it to
    its fetcher in `start`."""
    consumer._fetch_max_wait_ms = ms


def _positions(consumer: AIOKafkaConsumer) -> dict[TopicPartition, int]:
    """Where each assigned partition's next fetch starts (aiokafka 0.14's subscription state:
    `consumer.position` would await, and this runs before every fetch)."""
    subscription = consumer._subscription.subscription
    if subscription is None:
        return {}
    assignment = subscription.assignment
    states = ((tp, assignment.state_value(tp)) for tp in assignment.tps)
    return {tp: state.position for tp, state in states if state.has_valid_position}


class _GuardedConsumer(faust_aiokafka.Consumer):  # type: ignore[misc]
    def _new_consumer_thread(self) -> _GuardedThread:
        return _GuardedThread(self, loop=self.loop, beacon=self.beacon)


class _GuardedTransport(faust_aiokafka.Transport):  # type: ignore[misc]
    Consumer = _GuardedConsumer


def guarded_transport(app: faust.App, skipped: SkippedBatches) -> Any:
    """The transport to give `app` (`app.transport = guarded_transport(...)`), before it
    starts; the batches its consumer goes past are put in `skipped`."""
    transport = _GuardedTransport(app.conf.broker_consumer, app)
    transport.skipped = skipped  # read by its consumer thread
    return transport


async def _past_poison(
    consumer: AIOKafkaConsumer,
    probe: AIOKafkaConsumer,
    before: dict[TopicPartition, int],
    skipped: SkippedBatches,
) -> dict[TopicPartition, list[Any]]:
    """Redo the failed fetch with `probe`: hand over the records it gets, up to a poison batch,
    and move `consumer` past them (and past the batch). Each failure so moves a partition on."""
    handed: dict[TopicPartition, list[Any]] = {}
    for tp, position in before.items():
        consumer.seek(tp, position)  # the failed call may have dropped records it had drained
        probe.assign([tp])
        probe.seek(tp, position)
        end = (await probe.end_offsets([tp]))[tp]
        if position >= end:
            continue
        fetched = await fetch(probe, tp, timeout_ms=_PROBE_TIMEOUT_MS, end=end)
        if fetched.records:
            handed[tp] = fetched.records
            consumer.seek(tp, fetched.records[-1].offset + 1)
        if fetched.poison is not None:
            after = await decodable_from(probe, tp, fetched.poison, end, _PROBE_TIMEOUT_MS)
            log.warning("%s: offsets %s..%s skipped undecoded", tp, fetched.poison.start, after - 1)
            consumer.seek(tp, after)
            skipped.put(Skipped(fetched.poison, after))
    return handed
