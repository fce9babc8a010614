"""One factory's connection to the stack: the bridge's loop, the direct client, the
notification log, the tracking positions and the aggregates' snapshots, opened together and
closed together."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Collection, Coroutine
from typing import Any, TypeVar

from eventsourcing.persistence import OperationalError
from eventsourcing.utils import Environment

from eventsourcing_kafka_journal.bases import Bases
from eventsourcing_kafka_journal.bridge import LoopThread
from eventsourcing_kafka_journal.group import GroupFeed
from eventsourcing_kafka_journal.log import NotificationSource, SubscriptionLog
from eventsourcing_kafka_journal.snapshots import AggregateSnapshots
from eventsourcing_kafka_journal.tables import open_tables
from eventsourcing_kafka_journal.tracking import TrackingPositions
from journal import Journals
from journal.errors import JournalTruncated, Unavailable
from journal.kafka import TopicSpec, ensure_topic
from journal.settings import Settings
from journal.store import CassandraStore

T = TypeVar("T")

# Nothing depends on it (beyond retention the log reads Cassandra, which replication fills);
# it keeps an application's history safe while no worker replicates the topic.
_NO_RETENTION = -1
DEFAULT_NAME = "eventsourcing"


def settings_of(env: Environment) -> Settings:
    """The project's settings (`KJ_*`) looked up through the library's Environment, so an
    application's prefixed variables (`BANKACCOUNTS_KJ_TOPIC`) win; topic and keyspace
    default from the application's name."""
    given: dict[str, str] = {}
    for model, name, _info in Settings.settings_fields():
        variable = model.variable_of(name)
        value = env.get(variable)
        if value is not None:
            given[variable] = value
    name = env.name or DEFAULT_NAME
    defaults = {
        Settings.variable_of("topic"): re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200],
        Settings.variable_of("keyspace"): re.sub(r"\W", "_", name.lower())[:48],
    }
    return Settings.from_env({**defaults, **given})


class Connection:
    """Everything a factory's recorders share. Built on first use, closed with the factory."""

    def __init__(
        self,
        settings: Settings,
        loop: LoopThread,
        journals: Journals,
        store: CassandraStore,
        log: NotificationSource,
        tracking: TrackingPositions,
        timeout: float,
        tracking_group: str | None,
    ) -> None:
        self.settings = settings
        self.loop = loop
        self.journals = journals
        self.store = store  # ours, not the client's: closed after it
        self.log = log
        self.tracking = tracking
        self.timeout = timeout
        self.tracking_group = tracking_group  # subscriptions join it (group.py)
        self.feeds: set[GroupFeed] = set()  # the group subscriptions' members, left at close
        self.bases = Bases(journals)  # touched on the loop's thread only
        self.snapshots = AggregateSnapshots(journals, self.bases)

    @classmethod
    def open(
        cls, settings: Settings, timeout: float, tracking_group: str | None = None
    ) -> Connection:
        loop = LoopThread(f"kafka-journal {settings.topic}")
        try:
            parts = loop.run(_open(settings), timeout)
        except BaseException:
            loop.close()
            raise
        return cls(settings, loop, *parts, timeout, tracking_group)

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run a coroutine on the loop, bounded by the factory's timeout."""

        async def bounded() -> T:
            async with asyncio.timeout(self.timeout):
                return await make()

        try:
            return self.loop.run(bounded())
        except (Unavailable, JournalTruncated, TimeoutError) as error:
            # the library's word for a datastore that failed: its callers may retry
            raise OperationalError(str(error) or repr(error)) from error

    def close(self) -> None:
        try:
            self.loop.run(_close(self.journals, self.store, self.feeds))
        finally:
            self.loop.close()


async def _open(
    settings: Settings,
) -> tuple[Journals, CassandraStore, SubscriptionLog, TrackingPositions]:
    spec = TopicSpec(
        settings.topic, 1, settings.replication_factor, settings.min_insync_replicas, _NO_RETENTION
    )
    partitions = await ensure_topic(settings.kafka_access(), spec)
    if partitions != 1:
        raise OSError(
            f"topic {settings.topic} has {partitions} partitions: an application's topic needs "
            "exactly one (its offsets are the notification order)"
        )
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        grow = await store.grow(settings.topic)
        if grow is not None:
            # its events would go on in a topic of several partitions, out of the order the
            # notification log is (docs/growing.md): applications scale by applications
            raise OSError(
                f"topic {settings.topic} is grown into {grow.new_topic} ({grow.phase.value}): "
                "an application's topic keeps one partition, whose offsets are the "
                "notification order, so an application does not follow a grow"
            )
        journals = await Journals.connect(settings, store=store)
    except BaseException:
        await store.close()
        raise
    try:
        tables = await open_tables(store)
    except BaseException:
        await _close_clients(journals, store)
        raise
    log = SubscriptionLog(journals, tables)
    return journals, store, log, TrackingPositions(tables, settings.topic, log)


async def _close(
    journals: Journals, store: CassandraStore, feeds: Collection[GroupFeed] = ()
) -> None:
    """Leave the groups, close what `_open` opened; the store is not the client's (passed in)
    but ours."""
    try:
        for feed in feeds:
            await feed.leave()
    finally:
        await _close_clients(journals, store)


async def _close_clients(journals: Journals, store: CassandraStore) -> None:
    try:
        await journals.close()
    finally:
        await store.close()
