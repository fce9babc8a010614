"""The application's notification log: the one fold over its topic, in log order.

An application's topic has one partition, so Kafka's offsets are a total order of everything
the application recorded. `NotificationLog` consumes that partition from offset 0 and applies
the one fold (`JournalState.apply`) to every record, journal by journal, as replication and
reads do; each event of an accepted Append gets the next notification id, 1, 2, 3, ... A
rejected Append (a lost race, a retry) takes no id, so the ids are contiguous and strictly
increasing, and an insert's ids are known once its records are acknowledged and folded.
Accepted records that carry a tracking position raise that application's position.

It is the module's stand-in for the subscription of the queries issue (issue 13) behind
`NotificationSource`: it holds the notifications in memory and needs the topic from offset 0
(the module creates application topics without retention), which that subscription, reading
Cassandra beyond retention, removes.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord
from eventsourcing.persistence import Notification

from eventsourcing_kafka_journal.wire import decode_event, tracking_of
from journal.actions import MalformedRecord, events_of, parse, raw_record
from journal.codec import DecodeError
from journal.consumers import start_consumer, stop_consumer
from journal.errors import InvalidValue, JournalTruncated, KafkaUnavailable
from journal.fence import Fence
from journal.fold import JournalState, Verdict
from journal.model import JournalKey
from journal.security import KafkaAccess

log = logging.getLogger(__name__)

APPLICATION_PARTITION = 0


class NotificationSource(Protocol):
    """What the recorders need of a notification log: the seam for issue 13's subscription.

    An implementation on that subscription keeps the same contract: the accepted events of the
    application's partition in offset order, numbered 1, 2, 3, ...; the ids a record got; the
    highest tracking position carried by accepted records; a way to wait until an offset (or
    the high watermark) is folded; listeners woken when notifications are added.
    """

    async def caught_up(self) -> None:
        """Return once everything acknowledged before the call is folded."""

    async def folded(self, offset: int) -> None:
        """Return once the record at `offset` is folded."""

    def ids_at(self, offset: int) -> list[int]:
        """The notification ids the record at `offset` got (none: rejected or not ours)."""

    def select(
        self, first: int, stop: int | None, limit: int, topics: Sequence[str]
    ) -> list[Notification]:
        """Folded notifications with ids from `first`, up to `stop`, at most `limit`."""

    def max_id(self) -> int | None: ...

    def tracking(self, application_name: str) -> int | None: ...

    def listen(self, event: threading.Event) -> None: ...

    def unlisten(self, event: threading.Event) -> None: ...

    async def close(self) -> None: ...


class NotificationLog:
    """The fold of partition 0 of one topic, kept current by a task on the bridge's loop."""

    def __init__(self, topic: str, kafka: KafkaAccess, fence: Fence) -> None:
        self._topic = topic
        self._kafka = kafka
        self._fence = fence
        self._tp = TopicPartition(topic, APPLICATION_PARTITION)
        self._states: dict[JournalKey, JournalState] = {}
        self._notifications: list[Notification] = []  # id n at index n - 1
        self._offsets: list[int] = []  # the record offset of each notification
        self._tracking: dict[str, int] = {}
        self._next = 0  # the next offset to fold
        self._progress = asyncio.Event()
        self._failure: BaseException | None = None
        self._listeners: set[threading.Event] = set()
        self._lock = threading.Lock()  # readers call from the library's threads
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        consumer = await start_consumer(self._kafka, fetch_max_wait_ms=50)
        consumer.assign([self._tp])
        beginning = (await consumer.beginning_offsets([self._tp]))[self._tp]
        if beginning > 0:
            await stop_consumer(consumer)
            raise JournalTruncated(
                f"{self._topic} starts at offset {beginning}: the notification log needs it "
                "from offset 0 (application topics are created without retention)"
            )
        consumer.seek(self._tp, 0)
        self._task = asyncio.create_task(self._run(consumer))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        try:
            while True:
                batches = await consumer.getmany(self._tp, timeout_ms=500)
                messages = batches.get(self._tp, [])
                if not messages:
                    continue
                added = False
                with self._lock:
                    for message in messages:
                        added = self._fold(message) or added
                        self._next = message.offset + 1
                self._wake(added)
        except KafkaError as error:
            self._failure = KafkaUnavailable(f"the notification log stopped: {error!r}")
            self._wake(True)
        except asyncio.CancelledError:
            self._failure = KafkaUnavailable("the notification log is closed")
            self._wake(True)
            raise
        finally:
            await stop_consumer(consumer)

    def _wake(self, added: bool) -> None:
        self._progress.set()
        self._progress = asyncio.Event()
        if added:
            with self._lock:
                for listener in self._listeners:
                    listener.set()

    def _fold(self, message: ConsumerRecord[bytes, bytes]) -> bool:
        """Fold one record; True if it added notifications."""
        try:
            action = parse(raw_record(message))
            if action is None:
                return False
            records = events_of(action)
        except (MalformedRecord, DecodeError, InvalidValue) as error:
            # replication quarantines it; reads skip it: so does the log
            log.warning("notification log: skipped %s@%s: %s", self._tp, message.offset, error)
            return False
        state = self._states.get(action.key, JournalState())
        state, verdict = state.apply(action.header, action.offset)
        self._states[action.key] = state
        if verdict is not Verdict.APPENDED:
            return False
        tracking = tracking_of(action.headers)
        if tracking is not None:
            known = self._tracking.get(tracking.application_name, 0)
            self._tracking[tracking.application_name] = max(known, tracking.notification_id)
        added = False
        for record in records:
            decoded = decode_event(action.key.id, record)
            if decoded is None:
                continue  # a tracking journal's event, or not written by this module
            stored = decoded.stored
            self._notifications.append(
                Notification(
                    id=len(self._notifications) + 1,
                    originator_id=stored.originator_id,
                    originator_version=stored.originator_version,
                    topic=stored.topic,
                    state=stored.state,
                )
            )
            self._offsets.append(action.offset)
            added = True
        return added

    async def folded(self, offset: int) -> None:
        while self._next <= offset:  # bounded by the caller (Connection.run)
            if self._failure is not None:
                raise self._failure
            await self._progress.wait()

    async def caught_up(self) -> None:
        fence = await self._fence.fence(JournalKey(self._topic, "eventsourcing"), 0)
        if fence > 0:
            await self.folded(fence - 1)

    def ids_at(self, offset: int) -> list[int]:
        with self._lock:
            low = bisect.bisect_left(self._offsets, offset)
            high = bisect.bisect_right(self._offsets, offset)
            return list(range(low + 1, high + 1))

    def select(
        self, first: int, stop: int | None, limit: int, topics: Sequence[str]
    ) -> list[Notification]:
        if self._failure is not None:
            raise self._failure
        with self._lock:
            end = len(self._notifications) if stop is None else min(stop, len(self._notifications))
            found: list[Notification] = []
            for index in range(max(first, 1) - 1, end):
                if len(found) >= limit:
                    break
                notification = self._notifications[index]
                if not topics or notification.topic in topics:
                    found.append(notification)
            return found

    def max_id(self) -> int | None:
        if self._failure is not None:
            raise self._failure
        with self._lock:
            return len(self._notifications) or None

    def tracking(self, application_name: str) -> int | None:
        with self._lock:
            return self._tracking.get(application_name)

    def listen(self, event: threading.Event) -> None:
        with self._lock:
            self._listeners.add(event)

    def unlisten(self, event: threading.Event) -> None:
        with self._lock:
            self._listeners.discard(event)
