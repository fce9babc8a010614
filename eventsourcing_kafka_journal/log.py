"""The application's notification log: the topic's subscription, numbered by an index.

An application's topic has one partition, so Kafka's offsets are a total order of everything
the application recorded. The subscription (journal/subscriptions/subscription.py) delivers
the events of the Appends the one fold accepted, in offset order, from any position: from
Kafka within retention, from Cassandra's `appends` table beyond it. The log numbers those
events 1, 2, 3, ... (the library's cases expect contiguous ids: `test_insert_select` asserts
them, and its switch for other ids covers only the subscribe case).

Numbering needs the count of what came before, so it is kept, not recomputed, in tables the
module creates in the store's keyspace (tables.py): `eventsourcing_numbers` has a row per
record that holds notifications (its first id, offset and count), and `eventsourcing_numbered`
says up to which offset the rows are complete and the next id. Numbering extends them from there
(`Numbering.number`): usually with the records of our own insert only (the last ones, whose
counts we know: no read), else by reading the subscription from that offset. Every writer writes
the same rows (the numbering is a function of the log), so concurrent writers agree; the mark is
written after its rows, with `USING TIMESTAMP` from its offset, so a slow write never takes it
back.

A read from id N looks up the record holding N and reads the subscription from that record
on, counting on from its first id: no fold from offset 0, nothing held per notification.
Events deleted through the journal API from an application's aggregates would shift the ids
of a later read (the module itself never deletes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol

from eventsourcing.persistence import Notification, OperationalError, StoredEvent, Tracking

from eventsourcing_kafka_journal.tables import EventsourcingTables, NumbersRow
from eventsourcing_kafka_journal.wire import decode_event, tracking_of
from journal import JournalKey, Journals, SubscribedEvent, SubscriptionPosition

APPLICATION_PARTITION = 0
_BUCKET_IDS = 1_000_000  # ids per Cassandra partition of the numbers (far above one record's)
_WRITES_AT_ONCE = 64


class NotificationSource(Protocol):
    """What the recorders need of a notification log: the accepted events of the
    application's partition in offset order, numbered 1, 2, 3, ...; nothing held per
    notification."""

    def notifications(
        self, first: int, topics: Sequence[str], *, live: bool
    ) -> AsyncGenerator[Notification, None]:
        """Notifications with ids from `first` on; `live`: forever, else up to the end of the
        partition as of the call."""

    async def select(
        self, first: int, stop: int | None, limit: int, topics: Sequence[str]
    ) -> list[Notification]:
        """Notifications with ids from `first`, up to `stop`, at most `limit`."""

    async def max_id(self) -> int | None:
        """The highest id as of the end of the partition when asked."""

    async def ids(self, counts: Mapping[int, int]) -> dict[int, int]:
        """The first ids of our accepted records: `counts` has their offsets and number of
        notifications."""

    async def first_id(self, offset: int, count: int) -> int:
        """The first id of the accepted record at `offset`, which holds `count` notifications
        (numbered first if it is not yet)."""

    async def end(self) -> int:
        """An offset every record acknowledged before the call lies below."""

    def tracked(self, after: int) -> AsyncGenerator[tuple[Tracking, int], None]:
        """The positions accepted records after offset `after` carry, with their offsets, up
        to the end of the partition as of the call."""


def notification_of(notification_id: int, stored: StoredEvent) -> Notification:
    return Notification(
        id=notification_id,
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=stored.topic,
        state=stored.state,
    )


@dataclass(frozen=True, slots=True)
class _Numbered:
    """Records up to `as_of` are numbered; the next record's first id is `next_id`."""

    as_of: int = -1
    next_id: int = 1


class SubscriptionLog:
    """The notification log of one application's topic."""

    def __init__(self, journals: Journals, tables: EventsourcingTables) -> None:
        self._journals = journals
        self._tables = tables
        self._topic = journals.topic
        self._key = JournalKey(journals.topic, "eventsourcing")
        self._numbering = asyncio.Lock()  # one numbering at a time in this process

    async def _events(self, after: int, *, live: bool) -> AsyncGenerator[SubscribedEvent, None]:
        """The accepted events of the records after offset `after`."""
        position = SubscriptionPosition.of({APPLICATION_PARTITION: after})
        items = self._journals.subscribe(position, live=live)
        try:
            async for item in items:
                if isinstance(item, SubscribedEvent):
                    yield item
        finally:
            if isinstance(items, AsyncGenerator):  # its consumer stops now, not when collected
                await items.aclose()

    async def _records(
        self, after: int, *, live: bool
    ) -> AsyncGenerator[tuple[int, list[StoredEvent]], None]:
        """Each accepted record after offset `after` with notifications: its offset and
        their events, once its last event is read."""
        offset, found = -1, list[StoredEvent]()
        async with aclosing(self._events(after, live=live)) as events:
            async for item in events:
                if item.record.offset != offset:
                    if found:  # its last event is gone (deleted from the store)
                        yield offset, found
                    offset, found = item.record.offset, []
                decoded = decode_event(item.key.id, item.record)
                if decoded is not None:  # else a tracking journal's event, or not ours
                    found.append(decoded.stored)
                # the last event of a record has the record's own offset as its position
                if item.position.offset(APPLICATION_PARTITION) == offset:
                    if found:
                        yield offset, found
                    offset, found = -1, []
            if found:
                yield offset, found

    async def _mark(self) -> _Numbered:
        found = await self._tables.numbered(self._topic)
        return _Numbered(*found) if found is not None else _Numbered()

    async def _record_of(self, notification_id: int) -> NumbersRow | None:
        """The numbered record holding `notification_id` (None: not numbered yet)."""
        bucket = (notification_id - 1) // _BUCKET_IDS
        while bucket >= 0:
            row = await self._tables.numbers_at_or_below(self._topic, bucket, notification_id)
            if row is not None:
                if notification_id >= row.first_id + row.events:
                    return None
                return row
            bucket -= 1
        return None

    async def _latest(self, below: int, count: int) -> list[NumbersRow]:
        """Up to `count` numbered records with ids below `below`, the latest first."""
        return await self._tables.numbers_below(
            self._topic, (below - 2) // _BUCKET_IDS, below, count
        )

    async def _save(self, numbers: Sequence[NumbersRow], mark: _Numbered) -> None:
        """The rows first, then the mark that says they are complete."""
        for start in range(0, len(numbers), _WRITES_AT_ONCE):
            await asyncio.gather(
                *(
                    self._tables.save_numbers(self._topic, (n.first_id - 1) // _BUCKET_IDS, n)
                    for n in numbers[start : start + _WRITES_AT_ONCE]
                )
            )
        await self._tables.save_numbered(self._topic, mark.as_of, mark.next_id, mark.as_of + 2)

    async def _number(self, to: int, ours: Mapping[int, int]) -> dict[int, int]:
        """Number the records up to offset `to`; the first ids of those of `ours` (offset:
        count, accepted) this call numbered."""
        async with self._numbering:
            mark = await self._mark()
            if mark.as_of >= to:
                return {}
            numbers: list[NumbersRow] = []
            next_id = mark.next_id
            if all(o in ours for o in range(mark.as_of + 1, to + 1)):
                # only our own records since the mark: their counts are known, nothing to read
                for offset in range(mark.as_of + 1, to + 1):
                    numbers.append(NumbersRow(next_id, offset, ours[offset]))
                    next_id += ours[offset]
                as_of = to
            else:
                as_of = to
                async with aclosing(self._records(mark.as_of, live=False)) as records:
                    async for offset, found in records:
                        numbers.append(NumbersRow(next_id, offset, len(found)))
                        next_id += len(found)
                        as_of = max(as_of, offset)
            await self._save([n for n in numbers if n.events], _Numbered(as_of, next_id))
            return {n.record_offset: n.first_id for n in numbers if n.record_offset in ours}

    async def ids(self, counts: Mapping[int, int]) -> dict[int, int]:
        given = await self._number(max(counts), counts)
        missing = set(counts) - set(given)
        if missing:  # numbered meanwhile by another process: among the latest records
            below = (await self._mark()).next_id
            while missing and below > 1:
                latest = await self._latest(below, 100)
                if not latest:
                    below = ((below - 2) // _BUCKET_IDS) * _BUCKET_IDS + 1
                    continue
                for numbers in latest:
                    if numbers.record_offset in missing:
                        given[numbers.record_offset] = numbers.first_id
                        missing.discard(numbers.record_offset)
                below = latest[-1].first_id
        if missing:
            raise OperationalError(f"records at offsets {sorted(missing)} have no ids")
        return given

    async def first_id(self, offset: int, count: int) -> int:
        given = await self._number(offset, {offset: count})
        if offset in given:
            return given[offset]
        # numbered before: the rows go up in ids and offsets alike, so a binary search on ids
        low, high = 1, (await self._mark()).next_id - 1
        while low <= high:
            row = await self._record_of((low + high) // 2)
            if row is None:
                break
            if row.record_offset == offset:
                return row.first_id
            if row.record_offset < offset:
                low = row.first_id + row.events
            else:
                high = row.first_id - 1
        raise OperationalError(f"the record at offset {offset} has no ids")

    async def notifications(
        self, first: int, topics: Sequence[str], *, live: bool
    ) -> AsyncGenerator[Notification, None]:
        first = max(first, 1)
        mark = await self._mark()
        start = await self._record_of(first) if first < mark.next_id else None
        after, next_id = (
            (mark.as_of, mark.next_id)
            if start is None
            else (
                start.record_offset - 1,
                start.first_id,
            )
        )
        async with aclosing(self._records(after, live=live)) as records:
            async for _offset, found in records:
                for stored in found:
                    notification_id, next_id = next_id, next_id + 1
                    if notification_id >= first and (not topics or stored.topic in topics):
                        yield notification_of(notification_id, stored)

    async def select(
        self, first: int, stop: int | None, limit: int, topics: Sequence[str]
    ) -> list[Notification]:
        found: list[Notification] = []
        if limit < 1 or (stop is not None and stop < first):
            return found
        async with aclosing(self.notifications(first, topics, live=False)) as notifications:
            async for notification in notifications:
                if stop is not None and notification.id > stop:
                    break
                found.append(notification)
                if len(found) >= limit:
                    break
        return found

    async def end(self) -> int:
        return await self._journals.fence.fence(self._key, APPLICATION_PARTITION)

    async def max_id(self) -> int | None:
        end = await self.end()
        if end > 0:
            await self._number(end - 1, {})
        return (await self._mark()).next_id - 1 or None

    async def tracked(self, after: int) -> AsyncGenerator[tuple[Tracking, int], None]:
        offset = -1
        async with aclosing(self._events(after, live=False)) as events:
            async for item in events:
                if item.record.offset == offset:
                    continue  # every event of a record carries the record's headers
                offset = item.record.offset
                tracking = tracking_of(item.record.headers)
                if tracking is not None:
                    yield tracking, offset
