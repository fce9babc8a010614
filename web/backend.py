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
from typing import Protocol

from journal import (
    Deleted,
    EventRecord,
    JournalIdPage,
    JournalInfo,
    Journals,
    Payload,
    Position,
    Snapshot,
    SubscriptionPosition,
)
from journal.client import Appending, Erasure
from journal.errors import PartitionCountChanged
from journal.replication import Quarantined
from journal.replication import newest_quarantined as read_newest
from journal.subscriptions import EventPosition, GroupEvent, GroupStatus, SubscriptionItem


class SnapshotsHandle(Protocol):
    """One journal's snapshots, as `journal.client.snapshots.JournalSnapshots` offers them."""

    async def put(self, seq_nr: int, payload: Payload) -> Snapshot: ...

    async def latest(self, max_seq_nr: int = ...) -> Snapshot | None: ...

    async def delete(self, to: int) -> Position: ...


class JournalHandle(Appending, Protocol):
    """One journal, as `journal.client.journals.Journal` offers it (that class satisfies this)."""

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

    async def erase(self) -> Erasure:
        """Erase the journal (docs/erasure.md); SetupMissing without a key-encryption key."""
        ...

    @property
    def snapshots(self) -> SnapshotsHandle: ...


class GroupMemberHandle(Protocol):
    """A member of a subscription group, as `journal.subscriptions.groups.GroupMember` offers it."""

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
    """The subscription groups of the journals' topic, asked with the clients `journals`
    keeps for it (`Journals.group_statuses`): not three new connections per request."""
    return await journals.group_statuses()


@dataclass(frozen=True, slots=True)
class QuarantinePage:
    """The newest records of the quarantine, newest first, and how many records it holds
    (replay markers included)."""

    records: Sequence[Quarantined]
    total: int


async def newest_quarantined(journals: Journals, limit: int) -> QuarantinePage:
    """The newest records of the quarantine of `journals`' topic: only its last `limit`
    records are read, without values (`journal.replication.quarantine.newest_quarantined`)."""
    found, total = await read_newest(journals.kafka.config.kafka, journals.topic, limit)
    return QuarantinePage(found, total)


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
