"""Two instances of one process application tracking their upstream through one subscription
group (`KJ_TRACKING_GROUP`), against the real servers: one is stopped while the upstream keeps
recording, the other takes over at the group's checkpoint, and every upstream notification is
processed exactly once downstream (its events and its tracking records say so)."""

from __future__ import annotations

import asyncio
from collections import Counter as Tally
from contextlib import ExitStack
from functools import singledispatchmethod
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.domain import Aggregate, DomainEventProtocol, event
from eventsourcing.projection import EventSourcedProjection, EventSourcedProjectionRunner

from eventsourcing_kafka_journal.recorders import KafkaApplicationRecorder, KafkaProcessRecorder
from journal.subscriptions.groups import group_statuses
from tests.support.eventually import eventually
from tests.support.harness import unique

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("stack_environment")]

UPSTREAM = "Upstream"


class Item(Aggregate):
    @event("Created")
    def __init__(self, n: int) -> None:
        self.n = n


class Upstream(Application[UUID]):
    def add(self, n: int) -> None:
        self.save(Item(n))


class Seen(Aggregate):
    """An upstream notification processed by one instance."""

    @event("Created")
    def __init__(self, notification_id: int, instance: str) -> None:
        self.notification_id = notification_id
        self.instance = instance


class Processor(EventSourcedProjection[UUID]):
    """Records a `Seen` (a new aggregate: a second processing would record a second one) per
    upstream notification, naming its instance."""

    @singledispatchmethod
    def policy(
        self, domain_event: DomainEventProtocol[UUID], processing_event: ProcessingEvent[UUID]
    ) -> None:
        if isinstance(domain_event, Item.Created):
            tracking = processing_event.tracking
            assert tracking is not None
            instance = self.env.get("INSTANCE", "")
            processing_event.collect_events(Seen(tracking.notification_id, instance))


Runner = EventSourcedProjectionRunner[Upstream, Processor]


def seen(reader: Processor) -> list[tuple[int, str]]:
    """(upstream notification id, instance) of every `Seen` recorded downstream."""
    found = []
    for notification in reader.recorder.select_notifications(None, 1_000_000):
        domain_event: Any = reader.mapper.to_domain_event(notification)
        found.append((domain_event.notification_id, domain_event.instance))
    return found


def tracked(reader: Processor) -> list[int]:
    """Every upstream position the downstream's accepted records carry."""
    recorder = reader.recorder
    assert isinstance(recorder, KafkaProcessRecorder)
    connection = recorder.connection

    async def positions() -> list[int]:
        return [
            t.notification_id
            async for t, _offset in connection.log.tracked(-1)
            if t.application_name == UPSTREAM
        ]

    return connection.run(positions)


async def test_two_instances_share_the_group_one_stops_the_other_takes_over_each_once() -> None:
    group = unique("processor")
    env = {
        "UPSTREAM_KJ_TOPIC": unique("es_up"),
        "PROCESSOR_KJ_TOPIC": unique("es_down"),
        "KJ_TRACKING_GROUP": group,
    }
    upstream = Upstream(env)
    reader = Processor(env)
    assert isinstance(upstream.recorder, KafkaApplicationRecorder)
    access = upstream.recorder.connection.settings.kafka_access()
    runners: dict[str, Runner] = {}

    def start(instance: str) -> Runner:
        runner = Runner(
            application_class=Upstream,
            projection_class=Processor,
            env={**env, "INSTANCE": instance},
        )
        return runner.__enter__()

    async def add(count: int) -> None:
        for n in range(count):
            await asyncio.to_thread(upstream.add, n)

    async def members() -> int:
        statuses = await group_statuses(access, env["UPSTREAM_KJ_TOPIC"])
        return sum(len(s.members) for s in statuses if s.name == group)

    try:
        await add(10)
        for instance in ("a", "b"):
            runners[instance] = await asyncio.to_thread(start, instance)

        async def both_joined() -> bool:
            return await members() == 2

        await eventually(both_joined, "both instances are members of the group")

        async def processed(count: int) -> list[tuple[int, str]]:
            found = await asyncio.to_thread(seen, reader)
            return found if len(found) >= count else []

        await eventually(lambda: processed(10), "the first 10 notifications processed")

        # the upstream records on while the instance that holds the partition stops
        enough = asyncio.Event()

        async def writing_until_enough() -> None:
            while not enough.is_set():
                await add(1)

        writing = asyncio.create_task(writing_until_enough())
        try:
            found = await eventually(lambda: processed(15), "notifications processed meanwhile")
            owner = max(found)[1]
            survivor = "b" if owner == "a" else "a"
            stopped = runners[owner]
            stopped.stop()  # its subscription leaves once the notification in hand is processed

            async def left() -> bool:
                return await members() == 1

            await eventually(left, f"instance {owner} left the group")
            await asyncio.to_thread(stopped.__exit__, None, None, None)
            del runners[owner]  # closed (else closed at the end)
            last_of_owner = max(n for n, i in await asyncio.to_thread(seen, reader) if i == owner)

            async def taken_over() -> bool:
                found = await asyncio.to_thread(seen, reader)
                return any(n > last_of_owner and i == survivor for n, i in found)

            await eventually(taken_over, f"instance {survivor} took over")
        finally:
            enough.set()
            await writing
        total = await asyncio.to_thread(upstream.recorder.max_notification_id)
        assert total is not None

        async def all_processed() -> bool:
            return len(await asyncio.to_thread(seen, reader)) >= total

        await eventually(all_processed, f"all {total} upstream notifications processed")
        found = await asyncio.to_thread(seen, reader)
        everything = list(range(1, total + 1))
        assert sorted(n for n, _ in found) == everything, "processed twice, or missing"
        positions = await asyncio.to_thread(tracked, reader)
        assert sorted(positions) == everything, "a position tracked twice, or missing"
        assert all(i == survivor for n, i in found if n > last_of_owner), "the stopped one ran on"
        assert Tally(i for _, i in found)[survivor] > 0
    finally:

        def close() -> None:  # every one, whichever fails: their threads must end
            with ExitStack() as closing:
                closing.callback(reader.close)
                closing.callback(upstream.close)
                for runner in runners.values():
                    closing.callback(runner.__exit__, None, None, None)

        await asyncio.to_thread(close)  # off this loop: each factory stops a loop of its own
