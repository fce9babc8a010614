"""In-memory stand-ins for what the replicating agent talks to: the action topic (`MemoryLog`,
the agent's `Replay`), a store that can fail or stall (`Store`), the quarantine
(`MemoryQuarantine`) and Faust's tables (`Table`). The unit under test is the agent's logic
(`agents.replication.WorkerReplication`), driven as the Faust agent drives it: `assigned`, then
`handle` per record in offset order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from agents.limits import DEFAULT_CACHED_ROWS, DEFAULT_QUEUED_RECORDS
from agents.poison import SkippedBatches
from agents.replication import ReplaySource, WorkerReplication
from journal.codec.actions import RawRecord, record_headers
from journal.core.fold import JournalWrite
from journal.core.model import ActionRecord, JournalKey
from journal.errors import StoreUnavailable
from journal.replication.replicate import Replicator
from journal.store.base import JournalMeta
from journal.store.memory import MemoryStore
from tables.partitions import OwnedPartitions
from tables.tables import JournalTables
from tests.support import actions as a

TOPIC = "t"
PARTITION = 0


def raw(action: ActionRecord) -> RawRecord:
    """The Kafka record of `action`, as the agent's consumer hands it over."""
    return RawRecord(
        topic=action.key.topic,
        partition=action.partition,
        offset=action.offset,
        timestamp_ms=int(action.timestamp.timestamp() * 1000),
        key=action.key.id.encode("utf-8"),
        value=action.value,
        headers=record_headers(action.header, action.headers),
    )


class MemoryLog:
    """One partition of the action topic; `Replay` over it. A catch-up waits while `gate` is
    clear (it stands for a consumer still starting or fetching)."""

    def __init__(self) -> None:
        self.records: list[RawRecord | None] = []  # None: an undecodable (poison) record
        self.replays: list[tuple[int, int]] = []  # [start, end) of each catch-up's replicate
        self.committed: int | None = None  # the worker group's committed offset
        self.gate = asyncio.Event()
        self.gate.set()

    @property
    def end(self) -> int:
        return len(self.records)

    def append(self, key: JournalKey, first: int, last: int) -> RawRecord:
        return self._add(raw(a.append(key, self.end, first, last)))

    def delete(self, key: JournalKey, to: int) -> RawRecord:
        return self._add(raw(a.delete(key, self.end, to)))

    def malformed(self, key: JournalKey) -> RawRecord:
        """A record without its action header."""
        offset = self.end
        return self._add(RawRecord(TOPIC, PARTITION, offset, 0, key.id.encode(), b"x", []))

    def undecodable(self, count: int) -> None:
        self.records.extend([None] * count)

    def _add(self, record: RawRecord) -> RawRecord:
        self.records.append(record)
        return record

    @contextlib.asynccontextmanager
    async def open(self, partition: int) -> AsyncIterator[ReplaySource]:
        assert partition == PARTITION
        await self.gate.wait()
        yield _Source(self)


@dataclass(frozen=True, slots=True)
class _Source:
    log: MemoryLog

    async def end(self) -> int:
        return self.log.end

    async def replicate(self, replicator: Replicator, start: int, end: int) -> None:
        self.log.replays.append((start, end))
        if start < end:
            await replicator.apply([r for r in self.log.records[start:end] if r is not None])

    async def committed(self) -> int | None:
        return self.log.committed


class Store(MemoryStore):
    """The memory store, which can be down (`down`: unavailable; `failing`: its writes fail)
    or slow (its writes wait while `gate` is clear). It notes, at each pointer it saves, how
    many records the quarantine had delivered by then."""

    def __init__(self, quarantine: MemoryQuarantine) -> None:
        super().__init__()
        self.down = False
        self.failing = False
        self.gate = asyncio.Event()
        self.gate.set()
        self.pointer_gate = asyncio.Event()  # pointer reads wait while it is clear
        self.pointer_gate.set()
        self.pointer_reads = 0  # begun
        self.saved: list[tuple[int, int]] = []  # (pointer, records quarantined by then)
        self.refused = 0  # pointer reads refused while down
        self.row_reads: list[JournalKey] = []  # the journals whose rows were read
        self._quarantine = quarantine

    async def pointer(self, topic: str, partition: int) -> int | None:
        self.pointer_reads += 1
        await self.pointer_gate.wait()
        if self.down:
            self.refused += 1
            raise StoreUnavailable("the store is down")
        return await super().pointer(topic, partition)

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        if self.down:
            raise StoreUnavailable("the store is down")
        self.row_reads.extend(keys)
        return await super().stored(keys)

    async def apply(
        self, writes: Sequence[JournalWrite], stored: Mapping[JournalKey, JournalMeta]
    ) -> dict[JournalKey, JournalMeta]:
        await self.gate.wait()
        if self.down or self.failing:
            raise StoreUnavailable("the store's writes fail")
        return await super().apply(writes, stored)

    async def save_pointer(self, topic: str, partition: int, offset: int) -> None:
        if self.down:
            raise StoreUnavailable("the store is down")
        self.saved.append((offset, len(self._quarantine.delivered)))
        await super().save_pointer(topic, partition, offset)

    async def seq_nrs(self, key: JournalKey) -> list[int]:
        meta = await self.meta(key)
        return [] if meta is None else [e.event.seq_nr async for e in self.read(key, meta)]


@dataclass(slots=True)
class MemoryQuarantine:
    """Records put wait in `pending` until a flush delivers them; the next `failures` puts
    fail (the quarantine topic unreachable)."""

    pending: list[tuple[RawRecord, str]] = field(default_factory=list)
    delivered: list[tuple[RawRecord, str]] = field(default_factory=list)
    failures: int = 0

    async def put(self, record: RawRecord, reason: str) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("the quarantine topic is unreachable")
        self.pending.append((record, reason))

    async def flush(self) -> None:
        self.delivered.extend(self.pending)
        self.pending.clear()


class Table(dict[bytes, bytes]):
    """A Faust table as the agent uses it (get, set)."""


@dataclass(slots=True)
class Agent:
    """A `WorkerReplication` over memory, with what it talks to."""

    work: WorkerReplication
    log: MemoryLog
    store: Store
    quarantine: MemoryQuarantine
    owned: OwnedPartitions
    tables: JournalTables
    skipped: SkippedBatches

    def assigned(self) -> None:
        """The partition comes to the worker (Faust's assignment, then the agent's)."""
        self.owned.assign(PARTITION)
        self.work.assigned(PARTITION)

    async def handle(self, record: RawRecord) -> None:
        await self.work.handle(record, self.log.end)

    async def pointer(self) -> int | None:
        """The store's pointer of the partition, read even while the store is `down`."""
        return await MemoryStore.pointer(self.store, TOPIC, PARTITION)


@contextlib.asynccontextmanager
async def agent(
    cached_rows: int = DEFAULT_CACHED_ROWS,
    queued_records: int = DEFAULT_QUEUED_RECORDS,
    recovering: Callable[[], bool] = lambda: False,
) -> AsyncIterator[Agent]:
    """An agent over an empty log and store (its replication keeping `cached_rows` rows and
    queueing `queued_records` actions; `recovering`: Faust's tables recovering); closed (its
    replicator stopped) at the end."""
    quarantine = MemoryQuarantine()
    store = Store(quarantine)
    log = MemoryLog()
    owned = OwnedPartitions()
    tables = JournalTables(Table(), Table())
    skipped = SkippedBatches()
    owned.assign(PARTITION)  # Faust's assignment: records come after it, the agent's may not
    work = WorkerReplication(
        TOPIC,
        store,
        quarantine,
        tables,
        owned,
        log,
        skipped,
        max_backoff_s=0.2,
        cached_rows=cached_rows,
        queued_records=queued_records,
        recovering=recovering,
    )
    try:
        yield Agent(work, log, store, quarantine, owned, tables, skipped)
    finally:
        await work.close()


async def replicated(store: Store, log: MemoryLog, through: int) -> None:
    """The store as a previous owner of the partition left it: replicated through `through`."""
    records = [r for r in log.records[: through + 1] if r is not None]
    await Replicator(store, MemoryQuarantine()).apply(records)


async def until(condition: Callable[[], object], what: str, within_s: float = 5.0) -> None:
    """Wait for `condition` (the agent's replicator works in a task of its own)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within_s}s: {what}")
        await asyncio.sleep(0.01)


async def until_pointer(agent: Agent, offset: int, within_s: float = 5.0) -> None:
    """Wait until the store's pointer reaches `offset`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while (pointer := await agent.pointer()) is None or pointer < offset:
        if loop.time() > deadline:
            raise AssertionError(f"the store's pointer is {pointer}, not {offset}")
        await asyncio.sleep(0.01)
