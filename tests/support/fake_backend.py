"""A fake `web.backend.JournalBackend` for the HTTP layer's tests (no servers).

Journals live in dicts; a test makes the core fail in each way it can by setting `failure`
(raised by every operation) or `break_after` (a read fails after that many events).
`JOURNAL_REQUESTS` is a request for each journal route that the fake answers with 200.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from journal.client.conditional import FreshKey, new_idempotency_key
from journal.client.erasure import Erasure
from journal.client.listing import JournalIdPage
from journal.client.reading import JournalInfo
from journal.core.model import (
    Ack,
    Appended,
    Deleted,
    Event,
    EventRecord,
    JournalKey,
    NewEvent,
    Payload,
    PayloadMetadata,
    Position,
    check_consecutive,
)
from journal.errors import (
    KafkaUnavailable,
    PartitionCountChanged,
    SeqNrConflict,
    SnapshotBeyondJournal,
    SnapshotTooLarge,
)
from journal.replication.quarantine import Quarantined
from journal.store.base import Snapshot, snapshot_bytes
from journal.subscriptions.groups import EventPosition, GroupEvent, GroupPartition, GroupStatus
from journal.subscriptions.subscription import (
    Heartbeat,
    SubscribedEvent,
    SubscriptionItem,
    SubscriptionPosition,
)
from tests.support.http_api import journal_path
from web import JournalHandle
from web.backend import QuarantinePage

T0 = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


@dataclass
class FakeBackend:
    """Journals in a dict; `failure` is raised by every operation, `break_after` mid-read;
    `quarantine` and `group` are what `quarantined` and `workers` answer."""

    is_ready: bool = True
    failure: BaseException | None = None
    break_after: int | None = None
    records: dict[str, list[EventRecord]] = field(default_factory=dict)
    snapshots: dict[str, dict[int, Snapshot]] = field(default_factory=dict)
    acks: list[Ack] = field(default_factory=list)  # each accepted append's
    quarantine: list[Quarantined] = field(default_factory=list)  # oldest first
    group: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the workers' partitions
    # by group: the events acknowledged, and its members (started, then stopped)
    group_acks: dict[str, set[EventPosition]] = field(default_factory=dict)
    members: list[FakeMember] = field(default_factory=list)

    def journal(self, journal_id: str) -> JournalHandle:
        return FakeJournal(self, journal_id)

    async def journal_ids(self, prefix: str, after: str | None, limit: int) -> JournalIdPage:
        if self.failure is not None:
            raise self.failure
        ids = sorted(
            i for i in self.records if i.startswith(prefix) and (after is None or i > after)
        )
        return JournalIdPage(tuple(ids[:limit]), ids[limit - 1] if len(ids) > limit else None)

    def ready(self) -> bool:
        return self.is_ready

    def refusal(self) -> PartitionCountChanged | None:
        return None

    async def quarantined(self, limit: int) -> QuarantinePage:
        if self.failure is not None:
            raise self.failure
        return QuarantinePage(self.quarantine[-limit:][::-1], len(self.quarantine))

    def workers(self) -> Mapping[str, Sequence[int]]:
        return self.group

    async def subscribe(
        self, after: SubscriptionPosition | None, tags: Collection[str], live: bool
    ) -> AsyncIterator[Sequence[SubscriptionItem]]:
        """Every record of every journal, one partition, a journal's at a time; `after` skips
        up to its offset."""
        if self.failure is not None:
            raise self.failure
        start = -1 if after is None else after.offset(0)
        for journal_id, records in sorted(self.records.items()):
            batch: list[SubscriptionItem] = []
            for record in records:
                if record.offset > start and (not tags or record.event.tags & set(tags)):
                    position = SubscriptionPosition.of({0: record.offset})
                    batch.append(SubscribedEvent(JournalKey("t", journal_id), record, position))
            if batch:
                yield batch
        yield [Heartbeat(SubscriptionPosition.of({0: start}))]

    async def end_position(self) -> SubscriptionPosition:
        """After the last record of any journal (one partition)."""
        if self.failure is not None:
            raise self.failure
        last = max((r.offset for records in self.records.values() for r in records), default=-1)
        return SubscriptionPosition.of({0: last})

    def subscribe_group(self, name: str, tags: Collection[str]) -> FakeMember:
        member = FakeMember(self, name, frozenset(tags))
        self.members.append(member)
        return member

    async def group_statuses(self) -> list[GroupStatus]:
        """A group per name acknowledged in: partition 0 up to its first unacknowledged."""
        if self.failure is not None:
            raise self.failure
        end = max((len(records) for records in self.records.values()), default=0)
        return [
            GroupStatus(
                name,
                "Stable" if self.open_members(name) else "Empty",
                (),
                (GroupPartition(0, len(self.group_acks[name]), end, None, "journal", 0),),
            )
            for name in sorted(self.group_acks)
        ]

    def open_members(self, name: str) -> list[FakeMember]:
        return [m for m in self.members if m.name == name and m.started and not m.stopped]


@dataclass
class FakeMember:
    """A group member over the fake's records: each journal's events not acknowledged in the
    group (position: the journal's rank as partition, the record's offset), a journal's at a
    time, then
    a heartbeat every `heartbeat_s` until it stops."""

    backend: FakeBackend
    name: str
    tags: frozenset[str]
    heartbeat_s: float = 0.01
    started: bool = False
    stopped: bool = False
    out: set[EventPosition] = field(default_factory=set)

    async def start(self) -> None:
        if self.backend.failure is not None:
            raise self.backend.failure
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def batches(self) -> AsyncIterator[list[GroupEvent]]:
        acked = self.backend.group_acks.setdefault(self.name, set())
        for n, (journal_id, records) in enumerate(sorted(self.backend.records.items())):
            batch = [
                GroupEvent(JournalKey("t", journal_id), record, EventPosition(n, record.offset, 0))
                for record in records
                if not self.tags or record.event.tags & self.tags
            ]
            batch = [event for event in batch if event.position not in acked]
            self.out |= {event.position for event in batch}
            if batch:
                yield batch
        while not self.stopped:
            yield []
            await asyncio.sleep(self.heartbeat_s)  # the member's heartbeat interval

    def ack(self, *positions: EventPosition) -> int:
        taken = self.out & set(positions)
        self.out -= taken
        self.backend.group_acks[self.name] |= taken
        return len(taken)


@dataclass
class FakeJournal:
    backend: FakeBackend
    id: str

    def _check(self) -> None:
        if self.backend.failure is not None:
            raise self.backend.failure

    async def append(
        self,
        events: Sequence[Event],
        *,
        metadata: PayloadMetadata = PayloadMetadata(),
        headers: Mapping[str, str] | None = None,
        expected_seq_nr: int | None = None,
        idempotency_key: str | None = None,
        ack: Ack = Ack.VERIFIED,
    ) -> Appended:
        self._check()
        seq_nrs = check_consecutive(tuple(events))  # as the core's append does
        records = self.backend.records.setdefault(self.id, [])
        last = records[-1].seq_nr if records else 0
        if ack is Ack.VERIFIED and expected_seq_nr is None:
            expected_seq_nr = seq_nrs.from_ - 1
        if expected_seq_nr is not None and expected_seq_nr != last:
            raise SeqNrConflict(last, expected_seq_nr)
        self.backend.acks.append(ack)
        offset = len(records)
        records += [EventRecord(e, T0, 0, offset, metadata, dict(headers or {})) for e in events]
        return Appended(0, offset, seq_nrs)

    async def append_at_end(
        self,
        events: Sequence[NewEvent],
        *,
        metadata: PayloadMetadata = PayloadMetadata(),
        headers: Mapping[str, str] | None = None,
        expected_seq_nr: int | None = None,
        idempotency_key: str | FreshKey | None = FreshKey.FRESH,
    ) -> Appended:
        self._check()
        if isinstance(idempotency_key, FreshKey):  # as the direct client's: a new one
            idempotency_key = new_idempotency_key()
        records = self.backend.records.get(self.id, [])
        last = records[-1].seq_nr if records else 0
        first = last + 1 if expected_seq_nr is None else expected_seq_nr + 1
        numbered = [event.numbered(first + i) for i, event in enumerate(events)]
        return await self.append(
            numbered,
            metadata=metadata,
            headers=headers,
            expected_seq_nr=expected_seq_nr,
            idempotency_key=idempotency_key,
        )

    async def read(
        self, from_: int = 1, to: int = 2**63 - 1, limit: int | None = None
    ) -> AsyncIterator[EventRecord]:
        self._check()
        sent = 0
        for record in self.backend.records.get(self.id, []):
            if from_ <= record.seq_nr <= to and (limit is None or sent < limit):
                if sent == self.backend.break_after:
                    raise KafkaUnavailable("the broker went away mid-read")
                sent += 1
                yield record

    async def read_batches(
        self, from_: int = 1, to: int = 2**63 - 1, limit: int | None = None
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, three events at a time: a client sees lines of several writes."""
        batch: list[EventRecord] = []
        async for record in self.read(from_, to, limit):
            batch.append(record)
            if len(batch) == 3:
                yield batch
                batch = []
        if batch:
            yield batch

    async def info(self) -> JournalInfo:
        self._check()
        records = self.backend.records.get(self.id)
        return JournalInfo(records[-1].seq_nr if records else None, None)

    async def delete(self, to: int) -> Deleted:
        self._check()
        return Deleted(to, Position(0, 99))

    async def purge(self) -> Position:
        self._check()
        self.backend.records.pop(self.id, None)
        return Position(0, 100)

    async def erase(self) -> Erasure:
        self._check()
        self.backend.records.pop(self.id, None)
        return Erasure(Position(0, 101))

    @property
    def snapshots(self) -> FakeSnapshots:
        return FakeSnapshots(self)


SNAPSHOT_LIMIT = 3000  # the largest payload the fake stores (pass it as max_snapshot_bytes)


@dataclass
class FakeSnapshots:
    """A journal's snapshots in its backend's dict (their semantics: the store and core tests)."""

    journal: FakeJournal

    def _of(self) -> dict[int, Snapshot]:
        return self.journal.backend.snapshots.setdefault(self.journal.id, {})

    async def put(self, seq_nr: int, payload: Payload) -> Snapshot:
        self.journal._check()
        if len(snapshot_bytes(payload)[1]) > SNAPSHOT_LIMIT:
            raise SnapshotTooLarge("too large")
        last = (await self.journal.info()).seq_nr or 0
        if seq_nr > last:
            raise SnapshotBeyondJournal(seq_nr, last)
        snapshot = self._of()[seq_nr] = Snapshot(seq_nr, payload, T0, 7)
        return snapshot

    async def latest(self, max_seq_nr: int = 2**63 - 1) -> Snapshot | None:
        self.journal._check()
        found = [s for n, s in self._of().items() if n <= max_seq_nr]
        return max(found, key=lambda s: s.seq_nr, default=None)

    async def delete(self, to: int) -> Position:
        self.journal._check()
        self.journal.backend.snapshots[self.journal.id] = {
            n: s for n, s in self._of().items() if n > to
        }
        return Position(0, 101)


# at the journal's end: answered 200 however often it is sent
APPEND: dict[str, object] = {"json": {"events": [{"payload": {"a": 1}}]}}
JOURNAL_REQUESTS: list[tuple[str, str, dict[str, object]]] = [
    ("POST", journal_path("j", "/events"), APPEND),
    ("GET", journal_path("j", "/events"), {}),
    ("GET", journal_path("j"), {}),
    ("DELETE", journal_path("j", "/events?to=1"), {}),
    ("PUT", journal_path("j", "/snapshots/1"), {"json": {"payload": 1}}),
    ("GET", journal_path("j", "/snapshots/latest"), {}),
    ("DELETE", journal_path("j", "/snapshots?to=1"), {}),
    ("DELETE", journal_path("j", "/payloads"), {}),
    ("DELETE", journal_path("j"), {}),  # the purge last: the routes before need the journal
    ("GET", "/journals", {}),
]
