"""The library's recorders on Kafka Journal. Each call runs on the factory's event loop."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    IntegrityError,
    Notification,
    OperationalError,
    ProcessRecorder,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
)

from eventsourcing_kafka_journal.connection import Connection
from eventsourcing_kafka_journal.group import GroupFeed
from eventsourcing_kafka_journal.snapshots import AggregateSnapshots
from eventsourcing_kafka_journal.wire import (
    decode_event,
    encode_event,
    journal_id_of,
    seq_nr_of,
    tracking_event,
    tracking_headers,
    tracking_journal_id,
)
from journal import Position
from journal.errors import SeqNrConflict, Unavailable


class _Batch:
    """One aggregate's events of an insert: one Append, so all or none of them."""

    def __init__(self, journal_id: str, events: list[StoredEvent]) -> None:
        for previous, current in itertools.pairwise(events):
            if current.originator_version != previous.originator_version + 1:
                raise IntegrityError(
                    f"versions of {journal_id} must be consecutive in a batch: "
                    f"{current.originator_version} follows {previous.originator_version}"
                )
        self.journal_id = journal_id
        self.events = events

    @property
    def first_version(self) -> int:
        return self.events[0].originator_version


def _batches(stored_events: Sequence[StoredEvent]) -> list[_Batch]:
    grouped: dict[str, list[StoredEvent]] = {}
    for stored in stored_events:
        grouped.setdefault(journal_id_of(stored.originator_id), []).append(stored)
    return [_Batch(journal_id, events) for journal_id, events in grouped.items()]


class _Recording:
    """Inserts and selects of stored events, on the connection's loop (async)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    async def insert(
        self, stored_events: Sequence[StoredEvent], tracking: Tracking | None = None
    ) -> list[Position]:
        """Append each aggregate's events conditionally; returns their records' positions.

        A clash found before producing refuses the whole insert. With several aggregates,
        every one is looked at first; only a rival writing between that look and our own
        record makes a later part fail after earlier parts were accepted (module docstring).
        """
        batches = _batches(stored_events)
        if tracking is not None:
            await self._check_tracking(tracking)
        if not batches:
            return [] if tracking is None else [await self._insert_tracking(tracking)]
        bases = self._connection.bases
        several = len(batches) > 1
        planned = [(batch, await self._first_seq_nr(batch, look=several)) for batch in batches]
        headers = tracking_headers(tracking)
        positions: list[Position] = []
        for done, (batch, first) in enumerate(planned):
            try:
                positions.append(await self._append(batch, first, headers))
            except SeqNrConflict as error:
                if not several and error.seq_nr > 0 and bases.get(batch.journal_id) is None:
                    # the aggregate was not new after all: learn its first version, once
                    first = await self._first_seq_nr(batch, look=True)
                    try:
                        positions.append(await self._append(batch, first, headers))
                        continue
                    except SeqNrConflict as again:
                        error = again
                message = _clash(batch, error.seq_nr, first)
                if done:
                    message += f" (the events of {done} other aggregate(s) were recorded)"
                raise IntegrityError(message) from error
        if tracking is not None:
            await self._connection.tracking.recorded(tracking, max(p.offset for p in positions))
        return positions

    async def _first_seq_nr(self, batch: _Batch, *, look: bool) -> int:
        """The seqNr `batch` would start at. Without `look`, an aggregate of unknown first
        version is taken for a new one (the insert's conditional append finds out); with it,
        the journal is read first and a clash refuses the insert before anything is written.
        """
        journal_id = batch.journal_id
        base = self._connection.bases.get(journal_id)
        if base is None and look:
            info = await self._connection.journals.journal(journal_id).info()
            if info.seq_nr:
                base = await self._connection.bases.read(journal_id)
        if base is None:
            return 1
        first = seq_nr_of(batch.first_version, base)
        if first < 1:
            raise IntegrityError(
                f"{journal_id}: version {batch.first_version} is before the aggregate's "
                f"first, {base}"
            )
        if look:
            info = await self._connection.journals.journal(journal_id).info()
            if (info.seq_nr or 0) != first - 1:
                raise IntegrityError(_clash(batch, info.seq_nr or 0, first))
        return first

    async def _append(self, batch: _Batch, first: int, headers: dict[str, str]) -> Position:
        journal = self._connection.journals.journal(batch.journal_id)
        events = [encode_event(s, first + i) for i, s in enumerate(batch.events)]
        # verified, the default: accepted only if the journal is at first - 1, else SeqNrConflict
        position = await journal.append(events, headers=headers)
        if first == 1:
            self._connection.bases.put(batch.journal_id, batch.first_version)
        return position

    async def _check_tracking(self, tracking: Tracking) -> None:
        recorded = await self._connection.tracking.max_id(tracking.application_name)
        if recorded is not None and tracking.notification_id <= recorded:
            raise IntegrityError(
                f"tracking {tracking.application_name} {tracking.notification_id}: "
                f"position {recorded} is recorded already"
            )

    async def _insert_tracking(self, tracking: Tracking) -> Position:
        """A position recorded without events: an Append to the tracking journal."""
        journal = self._connection.journals.journal(tracking_journal_id(tracking.application_name))
        last = (await journal.info()).seq_nr or 0
        try:
            position = await journal.append(  # verified: only if the journal is at `last`
                [tracking_event(tracking, last + 1)], headers=tracking_headers(tracking)
            )
            await self._connection.tracking.recorded(tracking, position.offset)
            return position
        except SeqNrConflict as error:
            raise IntegrityError(
                f"tracking {tracking.application_name}: a rival recorded a position first"
            ) from error

    async def select(
        self,
        originator_id: UUID | str,
        gt: int | None,
        lte: int | None,
        desc: bool,
        limit: int | None,
    ) -> list[StoredEvent]:
        journal_id = journal_id_of(originator_id)
        bases = self._connection.bases
        base = bases.get(journal_id)
        # with the base known, only the seqNrs asked for are read
        from_ = 1 if base is None or gt is None else max(1, seq_nr_of(gt + 1, base))
        to = None if base is None or lte is None else seq_nr_of(lte, base)
        if to is not None and to < from_:
            return []
        journal = self._connection.journals.journal(journal_id)
        found: list[StoredEvent] = []
        reading = journal.read(from_) if to is None else journal.read(from_, to)
        async for record in reading:
            decoded = decode_event(journal_id, record)
            if decoded is None:
                continue
            bases.put(journal_id, decoded.base)
            version = decoded.stored.originator_version
            if (gt is None or version > gt) and (lte is None or version <= lte):
                found.append(decoded.stored)
        if desc:
            found.reverse()
        return found if limit is None else found[:limit]

    async def notification_ids(
        self, stored_events: Sequence[StoredEvent], positions: Sequence[Position]
    ) -> list[int]:
        """The ids of our records at `positions` (one per aggregate, in `_batches` order,
        each accepted once its append returned), in the order of `stored_events`: the
        library pairs them up."""
        batches = _batches(stored_events)
        offsets = [p.offset for p in positions]
        first_ids = await self._connection.log.ids(
            {o: len(b.events) for o, b in zip(offsets, batches, strict=True)}
        )
        ids: dict[tuple[str, int], int] = {}
        for batch, offset in zip(batches, offsets, strict=True):
            for index, stored in enumerate(batch.events):
                ids[batch.journal_id, stored.originator_version] = first_ids[offset] + index
        return [ids[journal_id_of(s.originator_id), s.originator_version] for s in stored_events]


def _clash(batch: _Batch, last: int, first: int) -> str:
    return (
        f"{batch.journal_id}: version {batch.first_version} is taken or out of turn "
        f"(the aggregate has {last} event(s); the insert would be event {first})"
    )


class _LoopRecorder(AggregateRecorder):
    """The library's blocking calls, each run on the connection's loop."""

    def __init__(self, connection: Connection, stored: _Recording | AggregateSnapshots) -> None:
        self.connection = connection
        self._stored = stored

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        stored = self._stored
        self.connection.run(lambda: stored.insert(stored_events))
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        stored = self._stored
        return self.connection.run(lambda: stored.select(originator_id, gt, lte, desc, limit))


class KafkaAggregateRecorder(_LoopRecorder):
    """An aggregate's events are a journal; a taken version is the library's IntegrityError."""

    def __init__(self, connection: Connection) -> None:
        self._recording = _Recording(connection)
        super().__init__(connection, self._recording)


class KafkaSnapshotRecorder(_LoopRecorder):
    """An aggregate's snapshots are its journal's (snapshots.py): a version's snapshot is
    the one at the seqNr of that version's event."""

    def __init__(self, connection: Connection) -> None:
        super().__init__(connection, connection.snapshots)


class KafkaApplicationRecorder(KafkaAggregateRecorder, ApplicationRecorder):
    """The notification log is the subscription of the application's one-partition topic,
    ids from log positions (log.py)."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        recording = self._recording
        tracking: Tracking | None = kwargs.get("tracking")

        async def insert() -> list[int]:
            positions = await recording.insert(stored_events, tracking)
            # a tracking position alone: its record holds no notification
            if not stored_events:
                return []
            return await recording.notification_ids(stored_events, positions)

        return self.connection.run(insert)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        first = 1 if start is None else start + (0 if inclusive_of_start else 1)
        log = self.connection.log
        return self.connection.run(lambda: log.select(first, stop, limit, topics))

    def max_notification_id(self) -> int | None:
        return self.connection.run(self.connection.log.max_id)

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[ApplicationRecorder]:
        group = self.connection.tracking_group
        if group is None:
            return KafkaSubscription(self, gt, topics)
        return KafkaGroupSubscription(self, gt, topics, group)


class _End:
    """The subscription ended: stopped, or failed with `error`."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class KafkaSubscription(Subscription[KafkaApplicationRecorder]):
    """The library's blocking iterator on a live subscription of the log, run on the
    connection's loop; at most `_AHEAD` notifications wait for the reader."""

    _AHEAD = 500

    def __init__(
        self, recorder: KafkaApplicationRecorder, gt: int | None, topics: Sequence[str]
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._loop = recorder.connection.loop
        self._items: asyncio.Queue[Notification | _End] = asyncio.Queue(self._AHEAD)
        first = 1 if gt is None else gt + 1
        log = recorder.connection.log

        async def pump() -> None:
            try:
                async for notification in log.notifications(first, topics, live=True):
                    await self._items.put(notification)
            except Exception as error:  # the reader raises it, as OperationalError
                await self._items.put(_End(error))

        async def start() -> asyncio.Task[None]:
            return asyncio.create_task(pump())

        self._pump = self._loop.run(start())

    def __next__(self) -> Notification:
        if self._has_been_stopped:
            raise StopIteration
        item = self._loop.run(self._items.get())
        if isinstance(item, Notification):
            return item
        self.stop()
        if isinstance(item.error, Unavailable):
            raise OperationalError(str(item.error)) from item.error
        if item.error is not None:
            raise item.error
        raise StopIteration

    def stop(self) -> None:
        super().stop()

        def end() -> None:
            self._pump.cancel()
            while not self._items.empty():  # room for the end, for a reader waiting now
                self._items.get_nowait()
            self._items.put_nowait(_End())

        if self._loop.alive:
            self._loop.loop.call_soon_threadsafe(end)


class KafkaGroupSubscription(Subscription[KafkaApplicationRecorder]):
    """The notifications handed to this instance while its member of subscription group
    `group` owns the application's partition (group.py); `stop` leaves the group once the
    notification in hand is processed."""

    def __init__(
        self,
        recorder: KafkaApplicationRecorder,
        gt: int | None,
        topics: Sequence[str],
        group: str,
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        connection = recorder.connection
        self._connection = connection
        self._feed = GroupFeed(connection.journals, connection.log, group, gt or 0, topics)
        connection.feeds.add(self._feed)  # left when the connection closes, at the latest
        connection.run(self._feed.start)

    def __next__(self) -> Notification:
        # not short-cut once stopped: this call acknowledges the notification handed out before
        try:
            notification = self._connection.loop.run(self._feed.next())
        except Unavailable as error:
            raise OperationalError(str(error)) from error
        if notification is None:
            raise StopIteration
        return notification

    def stop(self) -> None:
        super().stop()
        if self._connection.loop.alive:
            self._connection.run(self._feed.stop)


class KafkaTrackingRecorder(TrackingRecorder):
    """Positions ride in their events' records, or in the tracking journal without events
    (wire.py); each upstream application's highest is a row kept current (tracking.py)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._recording = _Recording(connection)

    def insert_tracking(self, tracking: Tracking) -> None:
        recording = self._recording
        self.connection.run(lambda: recording.insert((), tracking))

    def max_tracking_id(self, application_name: str) -> int | None:
        tracking = self.connection.tracking
        return self.connection.run(lambda: tracking.max_id(application_name))


class KafkaProcessRecorder(KafkaTrackingRecorder, KafkaApplicationRecorder, ProcessRecorder):
    def __init__(self, connection: Connection) -> None:
        KafkaTrackingRecorder.__init__(self, connection)
