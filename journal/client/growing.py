"""The direct client across a grow (docs/growing.md): where a journal is, and its successor.

A journal of OLD/p is in OLD while p is open and in NEW from the moment p's first Seal is in
the log. `Cuts` learns p's cut, for a view whose fence is F: the first Seal below F, if any.
It asks, in order: what it learnt already (a cut never changes); the partition's index (the
one a read asks: it holds the Seal's key like any journal's, so a Seal below the fence is
there unless the index started past it); the registry (replication records a cut before its
pointer passes it, so a Seal the index started past is recorded); and, when the index cannot
tell while the registry shows the partition being sealed, the log itself from the end recorded
before sealing (`first_seal`), bounded by `Settings.grow_wait_s` (then `JournalMoving`: 503).

`Growth` holds them and the successor: the `Journals` of NEW, built at the first need, whose
reading flow takes a moved journal's base from OLD's flow up to the cut (`Predecessor`). The
facade (journal/client/journals.py) sends an operation to NEW when the cut is known, else to
OLD, and redoes it in NEW, the same way, when OLD says `JournalMoved`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from journal.codec.envelope import Opener
from journal.core.grow import SEAL_ID, Grow, Phase
from journal.core.index import Indexed, RecordIndex
from journal.core.model import JournalKey
from journal.errors import JournalMoved, JournalMoving, StoreUnavailable
from journal.kafka.seals import first_seal
from journal.store.base import EventualStore
from kjconfig.access import KafkaAccess

if TYPE_CHECKING:
    from journal.client.journals import Journals
    from journal.client.reading import JournalView, ReadingFlow


class Registry:
    """The registry's record of a grow of `topic`, read afresh on demand: a caller waits for a
    read that started after it asked (concurrent callers share one).

    A read that finds no grow is a lease of `lease_s` from its start (`clear`): the command
    records its plan before its first Seal and waits `SEAL_AFTER_LEASES` leases between them,
    so nothing acknowledged before the lease ends can lie after a Seal."""

    def __init__(self, store: EventualStore, topic: str, lease_s: float = 0.0) -> None:
        self._store = store
        self._topic = topic
        self._lease_s = lease_s
        self.record: Grow | None = None
        self._reading: asyncio.Future[Grow | None] | None = None
        self._started = 0.0
        self._clear_until = 0.0  # monotonic

    def clear(self) -> bool:
        """No grow is planned as of a read that started less than a lease ago: whatever Kafka
        acknowledged by now lies below every Seal."""
        return self.record is None and time.monotonic() < self._clear_until

    async def fresh(self) -> Grow | None:
        asked = time.monotonic()
        while True:
            reading = self._reading
            if reading is not None and self._started < asked:
                if not reading.done():
                    await asyncio.shield(reading)  # one read at a time: then a newer one
                    continue
                # finished, its callback (`_done`) not run yet: awaiting a done future never
                # yields to the loop, so waiting for the callback would spin for ever
                self._done(reading)
                reading = None
            if reading is None:
                self._started = time.monotonic()
                reading = self._reading = asyncio.ensure_future(self._read(self._started))
                reading.add_done_callback(self._done)
            record = await asyncio.shield(reading)
            if record is not None:
                self.record = record
            return record

    async def _read(self, started: float) -> Grow | None:
        record = await self._store.grow(self._topic)
        if record is None:
            self._clear_until = max(self._clear_until, started + self._lease_s)
        return record

    def _done(self, reading: asyncio.Future[Grow | None]) -> None:
        if self._reading is reading:
            self._reading = None
        if not reading.cancelled():
            reading.exception()  # retrieved: every waiter sees it


class Cuts:
    """The cuts of OLD's partitions as this process learnt them (see the module)."""

    def __init__(
        self, topic: str, registry: Registry, index: RecordIndex, kafka: KafkaAccess, wait_s: float
    ) -> None:
        self._topic = topic
        self._registry = registry
        self._index = index
        self._kafka = kafka
        self._wait_s = wait_s
        self._seal = JournalKey(topic, SEAL_ID)
        self._known: dict[int, int] = {}
        # per partition: the index's start (`needs`) when the registry last said "no cut"
        self._confirmed: dict[int, int] = {}

    @property
    def topic(self) -> str:
        return self._topic

    def known(self, partition: int) -> int | None:
        return self._known.get(partition)

    def learn(self, grow: Grow | None) -> None:
        if grow is not None:
            self._known.update(grow.cut)

    async def below(self, partition: int, fence: int) -> int | None:
        """OLD/partition's cut if it lies below `fence` (a view's: the records below it).

        Within a lease (`Registry.clear`): the records below a fence (or below any offset a
        caller learnt from Kafka) were appended before this call; within a lease of a registry
        read that found no plan, the plan came after that read, and the first Seal at least
        `SEAL_AFTER_LEASES` leases after the plan: so no Seal lies below the fence, and the
        registry is not read again. A worker's tail, which drops what replication covered,
        would otherwise send most reads to the registry."""
        cut = self._known.get(partition)
        if cut is None:
            if self._registry.clear():
                return None  # within a lease: no Seal below the fence (above)
            cut = await self._find(partition, fence)
        return cut if cut is not None and cut < fence else None

    async def _find(self, partition: int, fence: int) -> int | None:
        if self._registry.record is None:
            # No grow seen yet (every deployment but a growing one): one registry read, shared
            # by concurrent callers and a lease when it finds none, answers without the index.
            # A read that started after the fence was taken and found no plan means no Seal
            # lies below the fence (the plan is recorded before the first Seal); a worker's
            # index of Seals (its verdicts tail) is then never waited on.
            try:
                recorded = await self._recorded(partition)
            except StoreUnavailable:
                recorded = None  # the index tells, below
            else:
                if self._registry.record is None or recorded is not None:
                    return recorded
        found = await self._index.lookup(self._seal, partition, fence)
        if isinstance(found, Indexed):
            if found.runs:
                # the first Seal the index holds; an earlier one, past which the index started,
                # would be recorded: the registry's cut wins
                recorded = await self._recorded(partition)
                first = found.runs[0].first if recorded is None else recorded
                self._known[partition] = first
                return first
            if found.needs < 0 or self._confirmed.get(partition, -2) >= found.needs:
                return None  # the index holds the partition's records since the registry said
            if self._registry.clear():
                return None  # within a lease: no Seal below the fence (`below`)
            try:
                recorded = await self._recorded(partition)
            except StoreUnavailable:
                # the store down (Kafka-only reads go on): a Seal the index started past is
                # recorded, and the registry had no grow when this process last read it
                if self._registry.record is None:
                    return None
                raise
            if recorded is None:
                self._confirmed[partition] = found.needs
            return recorded
        return await self._from_the_log(partition)

    async def _recorded(self, partition: int) -> int | None:
        grow = await self._registry.fresh()
        self.learn(grow)
        return None if grow is None else grow.cut.get(partition)

    async def _from_the_log(self, partition: int) -> int | None:
        """The index cannot tell: the registry, else (the partition being sealed) the log."""
        if self._registry.clear():
            return None  # within a lease: no Seal below the fence (`below`)
        try:
            grow = await self._registry.fresh()
        except StoreUnavailable as error:
            raise JournalMoving(
                f"{self._topic}/{partition}: neither the index nor the registry can tell "
                f"whether the partition is cut: {error}"
            ) from error
        self.learn(grow)
        cut = self._known.get(partition)
        if cut is not None or grow is None or grow.phase is not Phase.CREATED:
            return cut
        low = grow.low.get(partition)
        if low is None:
            return None  # not being sealed: the command records low before its Seal
        try:
            async with asyncio.timeout(self._wait_s):
                cut = await first_seal(self._kafka, self._topic, partition, low)
        except TimeoutError:
            raise JournalMoving(
                f"{self._topic}/{partition} is being cut by a grow: try again shortly"
            ) from None
        if cut is not None:
            self._known[partition] = cut
        return cut


@dataclass(frozen=True, slots=True)
class Predecessor:
    """OLD, as NEW's reading flow takes a moved journal's base from it: the fold of OLD/p up
    to its cut."""

    flow: ReadingFlow
    cuts: Cuts

    def key_of(self, key: JournalKey) -> JournalKey:
        return JournalKey(self.cuts.topic, key.id)

    async def view(self, key: JournalKey, opener: Opener | None = None) -> JournalView:
        """The journal's view in OLD up to the cut (`key`: its NEW key); its head opened with
        a read's `opener` (`ReadingFlow.view`)."""
        old = self.key_of(key)
        partition = self.flow.partition_of(old)
        cut = self.cuts.known(partition)
        if cut is None:  # NEW is asked only once the cut is known; a stale caller waits here
            cut = await self.cuts.below(partition, 2**63 - 1)
            if cut is None:
                raise JournalMoving(f"{old}: its partition is not cut yet: try again")
        return await self.flow.view(old, until=cut, opener=opener)


class Growth:
    """An OLD topic's grow as the direct client follows it: its registry, its cuts and its
    successor (`successor`, built once at the first need by `build`)."""

    def __init__(
        self,
        registry: Registry,
        cuts: Cuts,
        build: Callable[[Grow], Awaitable[Journals]],
    ) -> None:
        self.registry = registry
        self.cuts = cuts
        self._build = build
        self.predecessor_flow: ReadingFlow | None = None  # OLD's, set once it is built
        self._successor: Journals | None = None
        self._lock = asyncio.Lock()

    def built(self) -> Journals | None:
        """The successor's client if it was built (None: this process never needed it)."""
        return self._successor

    async def successor(self) -> Journals:
        if self._successor is None:
            async with self._lock:
                if self._successor is None:
                    grow = self.registry.record or await self.registry.fresh()
                    if grow is None:  # a Seal without a plan: another tool wrote it
                        raise JournalMoving(
                            "a partition is cut but the registry has no grow: try again"
                        )
                    self._successor = await self._build(grow)
        return self._successor

    async def acknowledged(self, key: JournalKey, partition: int, offset: int) -> None:
        """After Kafka acknowledged a record of `key` at `offset` that no fold verified (an
        append with `Ack.KAFKA`, a Purge): JournalMoved if it lies after its partition's cut.
        The registry is read after the acknowledgement: no grow there, no Seal before it (the
        plan is recorded before the first Seal); within a lease of a read that found none, not
        even read (`Registry.clear`): one read a lease, not one per wave of acknowledgements."""
        cut = self.cuts.known(partition)
        if cut is None:
            grow = self.registry.record
            if grow is None:
                if self.registry.clear():
                    return
                try:
                    grow = await self.registry.fresh()
                except StoreUnavailable:
                    grow = None  # the log tells then: the index, at its cost
                    cut = await self.cuts.below(partition, offset + 1)
                    if cut is not None and cut < offset:
                        raise JournalMoved(key, cut) from None
                    return
                if grow is None:
                    return
            self.cuts.learn(grow)
            cut = await self.cuts.below(partition, offset + 1)
        if cut is not None and cut < offset:
            raise JournalMoved(key, cut)
