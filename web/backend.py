"""What the HTTP views need from whoever serves journals.

`JournalBackend` is the seam between the views and the process they run in: the direct client
(`DirectBackend`, always ready) or the Faust worker (`app.backend.WorkerBackend`), ready once
its core is connected. Either serves every journal itself; the
worker's forwarding to a partition's owner is a middleware (`app.forwarding`), not the
backend's. The views never look behind it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeGuard, cast

from journal.client.conditional import FreshKey
from journal.client.journals import JournalInfo, Journals
from journal.client.listing import JournalIdPage
from journal.core.model import (
    Ack,
    Appended,
    Deleted,
    Event,
    EventRecord,
    NewEvent,
    Payload,
    PayloadMetadata,
    Position,
)
from journal.errors import InvalidValue, PartitionCountChanged
from journal.kafka.groups import EventPosition, GroupEvent, GroupStatus, group_statuses
from journal.kafka.quarantine import Quarantined, list_quarantine
from journal.kafka.subscription import SubscriptionItem, SubscriptionPosition
from journal.store.base import Snapshot


class SnapshotsHandle(Protocol):
    """One journal's snapshots, as `journal.client.snapshots.JournalSnapshots` offers them."""

    async def put(self, seq_nr: int, payload: Payload) -> Snapshot: ...

    async def latest(self, max_seq_nr: int = ...) -> Snapshot | None: ...

    async def delete(self, to: int) -> Position: ...


class JournalHandle(Protocol):
    """One journal, as `journal.client.journals.Journal` offers it (that class satisfies this)."""

    async def append(
        self,
        events: Sequence[Event],
        *,
        metadata: PayloadMetadata = ...,
        headers: Mapping[str, str] | None = ...,
        expected_seq_nr: int | None = ...,
        idempotency_key: str | None = ...,
        ack: Ack = ...,
    ) -> Appended:
        """Append consecutive events atomically; returns once the log accepted them
        (SeqNrConflict if it did not), or with `Ack.KAFKA` and no `expected_seq_nr` once
        Kafka acknowledged them."""
        ...

    async def append_at_end(
        self,
        events: Sequence[NewEvent],
        *,
        metadata: PayloadMetadata = ...,
        headers: Mapping[str, str] | None = ...,
        expected_seq_nr: int | None = ...,
        idempotency_key: str | FreshKey | None = ...,
    ) -> Appended:
        """Append events at the journal's end, numbered by the process that serialises the
        journal's appends; returns once the log accepted them, with their seqNrs."""
        ...

    def read(
        self, from_: int = ..., to: int = ..., limit: int | None = ...
    ) -> AsyncIterator[EventRecord]:
        """Stream the events in [from_, to], at most `limit`, in seqNr order.

        Failures of the reading flow (JournalTruncated, Kafka/Cassandra errors) surface from the
        first `__anext__`, before any event: the views rely on that to answer with a status.
        """
        ...

    def read_batches(
        self, from_: int = ..., to: int = ..., limit: int | None = ...
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, a non-empty list of events at a time (failures surface as in `read`)."""
        ...

    async def info(self) -> JournalInfo: ...

    async def delete(self, to: int) -> Deleted: ...

    async def purge(self) -> Position: ...

    @property
    def snapshots(self) -> SnapshotsHandle: ...


async def append_to(
    journal: JournalHandle,
    events: tuple[Event, ...] | tuple[NewEvent, ...],
    *,
    metadata: PayloadMetadata,
    headers: Mapping[str, str],
    expected_seq_nr: int | None,
    idempotency_key: str | FreshKey | None,
    ack: Ack,
) -> Appended:
    """A parsed append (`web.validation.ParsedAppend`'s parts) to `journal`: events with
    seqNrs as they are, events without at the journal's end (which only `Ack.VERIFIED` can
    answer: their seqNrs are known once the log accepted them). `FreshKey`: a new key for an
    append at the end (the command line's default), none for events with seqNrs (a repeat of
    the same seqNrs is safe without one)."""
    if _numbered(events):
        return await journal.append(
            events,
            metadata=metadata,
            headers=headers,
            expected_seq_nr=expected_seq_nr,
            idempotency_key=None if isinstance(idempotency_key, FreshKey) else idempotency_key,
            ack=ack,
        )
    if ack is not Ack.VERIFIED:
        raise InvalidValue(
            "events without seqNrs are numbered by the journal: only ack=verified answers them"
        )
    return await journal.append_at_end(
        cast(tuple[NewEvent, ...], events),  # the parse gives one kind or the other
        metadata=metadata,
        headers=headers,
        expected_seq_nr=expected_seq_nr,
        idempotency_key=idempotency_key,
    )


class GroupMemberHandle(Protocol):
    """A member of a subscription group, as `journal.kafka.groups.GroupMember` offers it."""

    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Commit what is acknowledged and leave: the rest goes to the next member."""
        ...

    def batches(self) -> AsyncIterator[list[GroupEvent]]:
        """The member's events a list at a time; [] after a while without any (a heartbeat)."""
        ...

    def ack(self, *positions: EventPosition) -> int:
        """Acknowledge these events: how many of them this member had out."""
        ...


async def topic_group_statuses(journals: Journals) -> list[GroupStatus]:
    """The subscription groups of the journals' topic (`journal.kafka.groups.group_statuses`)."""
    return await group_statuses(journals.kafka.config.kafka, journals.topic)


def _numbered(events: tuple[Event, ...] | tuple[NewEvent, ...]) -> TypeGuard[tuple[Event, ...]]:
    return isinstance(events[0], Event)


@dataclass(frozen=True, slots=True)
class QuarantinePage:
    """The newest records of the quarantine, newest first, and how many it holds."""

    records: Sequence[Quarantined]
    total: int


async def newest_quarantined(journals: Journals, limit: int) -> QuarantinePage:
    """The newest `limit` records of the quarantine of `journals`' topic. The whole
    quarantine is read (replay markers may follow a record anywhere): it is small, and a
    record in it is an operator's to look at."""
    found = await list_quarantine(journals.kafka.config.kafka, journals.topic)
    return QuarantinePage(found[-limit:][::-1], len(found))


def refusal_of(journals: Journals) -> PartitionCountChanged | None:
    """Why `journals` refuses its topic, or None (`JournalBackend.refusal`)."""
    guard = journals.writer.guard
    return None if guard is None else guard.refusal


class JournalBackend(Protocol):
    def journal(self, journal_id: str) -> JournalHandle:
        """The journal `journal_id` (a valid, non-empty id); cheap, does no I/O."""
        ...

    async def journal_ids(self, prefix: str, after: str | None, limit: int) -> JournalIdPage:
        """A page of the ids of journals that exist (`journal.client.listing`)."""
        ...

    def ready(self) -> bool:
        """Whether journal requests can be served now; False -> 503 with Retry-After."""
        ...

    def refusal(self) -> PartitionCountChanged | None:
        """Why this process refuses its topic (its partition count changed: journal/kafka/
        guard.py), or None; readiness answers 503 with it."""
        ...

    def subscribe(
        self, after: SubscriptionPosition | None, tags: Collection[str], live: bool
    ) -> AsyncIterator[Sequence[SubscriptionItem]]:
        """Every accepted event after `after`, a non-empty list of items at a time
        (`journal.client.journals.Journals.subscribe_batches`); any process serves it, nothing is
        forwarded."""
        ...

    async def end_position(self) -> SubscriptionPosition:
        """After every record the topic holds now (`Journals.end_position`): where a
        subscription "from now" starts."""
        ...

    async def quarantined(self, limit: int) -> QuarantinePage:
        """The newest `limit` (>= 1) records replication set aside (`newest_quarantined`)."""
        ...

    def workers(self) -> Mapping[str, Sequence[int]]:
        """Each worker of the group by its base URL, with the partitions it owns (ascending),
        as this process last learnt them; empty when it does not know (or has no group)."""

    def subscribe_group(self, name: str, tags: Collection[str]) -> GroupMemberHandle:
        """A member (not started) of subscription group `name` (a valid name) with `tags`."""
        ...

    async def group_statuses(self) -> list[GroupStatus]:
        """The topic's subscription groups, by name."""
        ...


class DirectBackend:
    """The direct client as a backend: every request is served by this process, always ready."""

    def __init__(self, journals: Journals) -> None:
        self._journals = journals

    def journal(self, journal_id: str) -> JournalHandle:
        return self._journals.journal(journal_id)

    async def journal_ids(self, prefix: str, after: str | None, limit: int) -> JournalIdPage:
        return await self._journals.ids(prefix, after, limit)

    def ready(self) -> bool:
        return True

    def refusal(self) -> PartitionCountChanged | None:
        return refusal_of(self._journals)

    def subscribe(
        self, after: SubscriptionPosition | None, tags: Collection[str], live: bool
    ) -> AsyncIterator[Sequence[SubscriptionItem]]:
        return self._journals.subscribe_batches(after, tags, live)

    async def end_position(self) -> SubscriptionPosition:
        return await self._journals.end_position()

    async def quarantined(self, limit: int) -> QuarantinePage:
        return await newest_quarantined(self._journals, limit)

    def workers(self) -> Mapping[str, Sequence[int]]:
        return {}  # no group

    def subscribe_group(self, name: str, tags: Collection[str]) -> GroupMemberHandle:
        return self._journals.subscribe_group(name, tags)

    async def group_statuses(self) -> list[GroupStatus]:
        return await topic_group_statuses(self._journals)
