"""Tracking an application through a subscription group: instances of one follower take turns.

With `KJ_TRACKING_GROUP` set (factory.py), the application recorder's `subscribe` joins that
subscription group (journal/subscriptions/groups.py) over the application's topic. The topic has one
partition, so one member at a time owns it: only that instance is handed notifications, the
others wait. A notification is acknowledged once its processing returned (the reader asks for
the next one), so the group's checkpoint (Kafka's committed offset) moves over processed
notifications only; the instance that gets the partition next starts there.

A handover waits for the notification in hand: a revocation, and a `stop`, complete once the
reader has come back for the next notification (its tracking record accepted), and only then
is the checkpoint committed. So a graceful handover processes each notification once. An
instance that dies leaves the notifications processed since its last commit to be delivered
again; the downstream's tracking refuses each one (IntegrityError), so none is processed twice,
and the runner that got it stops (restarted, it resumes after its recorded position).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass

from eventsourcing.persistence import Notification, StoredEvent

from eventsourcing_kafka_journal.log import NotificationSource, notification_of
from eventsourcing_kafka_journal.wire import decode_event
from journal import Journals
from journal.subscriptions import EventPosition

GROUP_VARIABLE = "KJ_TRACKING_GROUP"  # the subscription group a follower tracks through


@dataclass(frozen=True, slots=True)
class _Handed:
    """A notification for the reader, from the member's assignment `generation`."""

    notification: Notification
    position: EventPosition
    generation: int


@dataclass(frozen=True, slots=True)
class _Ended:
    """The feed ended: stopped, or its member failed with `error`."""

    error: BaseException | None = None


class GroupFeed:
    """The notifications of the partition while this instance's member owns it, from id
    `gt + 1` on (ids at or below are acknowledged unprocessed: the reader recorded them).
    Everything runs on the connection's loop; `next` is the reader's, one call at a time."""

    _AHEAD = 500

    def __init__(
        self, journals: Journals, log: NotificationSource, name: str, gt: int, topics: Sequence[str]
    ) -> None:
        self._log = log
        self._gt = gt
        self._topics = topics
        self.member = journals.subscribe_group(name, handover=self._handover)
        self._items: asyncio.Queue[_Handed | _Ended] = asyncio.Queue(self._AHEAD)
        self._in_hand: _Handed | None = None
        self._idle = asyncio.Event()  # nothing in hand
        self._idle.set()
        self._revoking = False
        self._stopping = False
        self._pump: asyncio.Task[None] | None = None
        self._left = asyncio.Event()

    async def start(self) -> None:
        await self.member.start()
        self._pump = asyncio.create_task(self._run())

    async def next(self) -> Notification | None:
        """The next notification (the one handed out before is processed); None once stopped."""
        self._settle()
        while not self._stopping:
            item = await self._items.get()
            if isinstance(item, _Ended):
                if item.error is not None:
                    await self.leave()
                    raise item.error
                break
            member = self.member
            if (
                item.generation == member.generation
                and item.position.partition in member.owned
                and not self._revoking
                and item.notification.id > self._gt
            ):
                self._in_hand = item
                self._idle.clear()
                return item.notification
            # else from an assignment since revoked: the next owner delivers it again
        await self.leave()
        return None

    async def stop(self) -> None:
        """No more notifications; the member leaves now if nothing is in hand, else once the
        reader comes back for the next one (its notification processed)."""
        self._stopping = True
        if self._items.full():
            self._items.get_nowait()  # room to wake a reader waiting now
        self._items.put_nowait(_Ended())
        if self._idle.is_set():
            await self.leave()

    async def leave(self) -> None:
        """Commit what is acknowledged and leave the group (the notification in hand, if any,
        unacknowledged: delivered again to the next owner)."""
        if self._left.is_set():
            return
        self._left.set()
        self._stopping = True
        self._in_hand = None  # abandoned: a revocation while leaving must not wait for it
        self._idle.set()
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        await self.member.stop()

    @contextlib.asynccontextmanager
    async def _handover(self) -> AsyncIterator[None]:
        """A revocation: hand out no more, and wait until the notification in hand is
        processed before the member commits and gives up the partition."""
        self._revoking = True
        try:
            await self._idle.wait()
            yield
        finally:
            self._revoking = False

    def _settle(self) -> None:
        """The notification in hand is processed: acknowledge it."""
        handed, self._in_hand = self._in_hand, None
        if handed is not None:
            self._gt = max(self._gt, handed.notification.id)
            self.member.ack(handed.position)
        self._idle.set()

    async def _run(self) -> None:
        try:
            await self._deliver()
        except Exception as error:  # the reader raises it
            await self._items.put(_Ended(error))

    async def _deliver(self) -> None:
        """The member's events as notifications, numbered as the log numbers them: the first
        record of an assignment by the log's index, the rest counted on."""
        member = self.member
        numbered: tuple[int, int] | None = None  # (generation, the next record's first id)
        batches = member.batches()
        try:
            async for batch in batches:
                generation = member.generation  # the batch's: no await since its delivery
                for offset, group in itertools.groupby(batch, lambda e: e.position.offset):
                    stored: list[tuple[EventPosition, StoredEvent]] = []
                    for event in group:
                        decoded = decode_event(event.key.id, event.record)
                        if decoded is None:  # a tracking journal's event: not a notification
                            member.ack(event.position)
                        else:
                            stored.append((event.position, decoded.stored))
                    if not stored:
                        continue
                    if numbered is None or numbered[0] != generation:
                        first = await self._log.first_id(offset, len(stored))
                    else:
                        first = numbered[1]
                    numbered = (generation, first + len(stored))
                    for notification_id, (position, stored_event) in enumerate(stored, first):
                        if notification_id <= self._gt or (
                            self._topics and stored_event.topic not in self._topics
                        ):
                            member.ack(position)  # nothing to process
                            continue
                        notification = notification_of(notification_id, stored_event)
                        await self._items.put(_Handed(notification, position, generation))
        finally:
            if isinstance(batches, AsyncGenerator):  # its fetch stops now, not when collected
                await batches.aclose()
