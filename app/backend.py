"""The worker as the HTTP API's backend: journals through the core, ready once it is connected.

Any worker answers any journal request correctly: reads on a partition this worker does not
own fall back to a scan of the partition (see journal/client/journals.py), and a listing of journal
ids reads the keys of unreplicated records from Kafka (journal/client/listing.py says why).

So a worker serves while its group rebalances (forwarding serves a request here when the
owner is not known): readiness is not the group's stability, else every worker of the group
would leave a load balancer at once on each rebalance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import Protocol

from journal import JournalIdPage, Journals, SubscriptionPosition
from journal.client import Deferred
from journal.errors import PartitionCountChanged
from journal.subscriptions import GroupStatus, SubscriptionItem
from web.backend import (
    GroupMemberHandle,
    JournalHandle,
    QuarantinePage,
    newest_quarantined,
    refusal_of,
    topic_group_statuses,
)


class GroupWorkers(Protocol):
    def workers(self) -> Mapping[str, Sequence[int]]:
        """Each worker's base URL and the partitions it owns; empty when not known."""
        ...


class WorkerBackend:
    def __init__(self, journals: Deferred[Journals], group: GroupWorkers) -> None:
        self._journals = journals
        self._group = group

    def journal(self, journal_id: str) -> JournalHandle:
        return self._journals.value().journal(journal_id)  # ready() said yes

    async def journal_ids(self, prefix: str, after: str | None, limit: int) -> JournalIdPage:
        return await self._journals.value().ids(prefix, after, limit)  # ready() said yes

    def ready(self) -> bool:
        return self._journals.done()

    def refusal(self) -> PartitionCountChanged | None:
        return refusal_of(self._journals.value()) if self._journals.done() else None

    def subscribe(
        self, after: SubscriptionPosition | None, tags: Collection[str], live: bool
    ) -> AsyncIterator[Sequence[SubscriptionItem]]:
        return self._journals.value().subscribe_batches(after, tags, live)  # ready() said yes

    async def end_position(self) -> SubscriptionPosition:
        return await self._journals.value().end_position()  # ready() said yes

    async def quarantined(self, limit: int) -> QuarantinePage:
        return await newest_quarantined(self._journals.value(), limit)  # ready() said yes

    def workers(self) -> Mapping[str, Sequence[int]]:
        return self._group.workers()

    def subscribe_group(self, name: str, tags: Collection[str]) -> GroupMemberHandle:
        return self._journals.value().subscribe_group(name, tags)  # ready() said yes

    async def group_statuses(self) -> list[GroupStatus]:
        return await topic_group_statuses(self._journals.value())  # ready() said yes
