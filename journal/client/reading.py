"""The reading flow: one journal as of now, from the store and Kafka together.

For every read and every look at a journal's state (`ReadingFlow`; the facade, the conditional
appends, snapshots and listing all read through it):
1. The fence: where "now" is in the journal's partition (its high watermark by default, or a
   Mark: `journal.kafka.fence`). Meanwhile the store's row of the journal is read.
2. The index (a worker's tables, or the direct client's `TailIndex`) says where the journal's
   actions below the fence are, without touching other journals' records. If it cannot tell,
   the partition is scanned from the store's replicated offset (counted:
   `kafka_journal_reads_total`). With the store down, the index's runs answer when they hold
   the whole journal; else a worker scans the partition from offset 0 (its tables cannot tell
   after it took a partition over) unless its agent is only behind the read (then it answers
   StoreUnavailable: the agent gets there sooner without a scan taking its CPU, issue 43),
   at most `max_scans` at once (one more answers
   StoreUnavailable at once: each costs the retained log's records, and the CPU they took
   starved the agent that would let the tables answer: issue 43), and the direct client answers
   StoreUnavailable, saying why: its scan would cost every record of the retained log.
3. The records the store does not reflect yet are fetched by offset and folded onto the
   store's state with the one fold (`journal.kafka.head.fold_head`). Nothing there: the store
   answers alone and Kafka is not read.
4. Stream the store's events above deleteTo (none if the head purged the journal), then the
   head's. Nothing is returned before step 3 is complete, so a Delete not yet replicated is
   honoured, and a read is the same function of the log before and after replication.
A read writes nothing (unless the Mark fence is chosen).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from journal.client.growing import Predecessor
from journal.codec.actions import events_of
from journal.codec.envelope import Opener
from journal.core.fold import JournalState, rebased
from journal.core.index import BEHIND, IndexAnswer, Indexed, NotIndexed, OffsetRun, RecordIndex
from journal.core.model import SEQ_NR_MAX, EventRecord, JournalKey, check_seq_nr
from journal.errors import InvalidValue, JournalMoved, JournalTruncated, StoreUnavailable
from journal.kafka import DEFAULT_MAX_KAFKA_ONLY_SCANS
from journal.kafka.fence import Fence
from journal.kafka.head import JournalHead, fold_head, fold_whole
from journal.kafka.records import KafkaRecords
from journal.metrics import METRICS
from journal.store.base import EventualJournal, FirstPage, JournalMeta


@dataclass(frozen=True, slots=True)
class JournalInfo:
    """A journal's state as of the read: last seqNr and deleteTo (None when there is none)."""

    seq_nr: int | None
    delete_to: int | None


@dataclass(frozen=True, slots=True)
class JournalView:
    """One journal as of one fence: the store's row and what Kafka adds to it."""

    partition: int
    meta: JournalMeta | None  # None: the store has no row, or is not used (Kafka alone)
    head: JournalHead
    before: JournalView | None = None  # a moved journal's view in the old topic, to the cut

    @property
    def info(self) -> JournalInfo:
        state = self.head.state
        return JournalInfo(state.seq_nr or None, state.delete_to or None)


_SPILL_FETCH = 16  # Appends fetched again at a time, when a head outgrew its budget


def _seq_nr(record: EventRecord) -> int:
    return record.event.seq_nr


def _continuing(events: Sequence[EventRecord], last: int, stop: int) -> list[EventRecord]:
    """The events of `events` (in seqNr order, as a `FirstPage`'s) that continue `last`
    without a hole, up to `stop`: those at or below `last` are deleted or before the read's
    `from_`; a hole means the rest was replicated after the page was read (`read` gets it)."""
    start = bisect.bisect_right(events, last, key=_seq_nr) if events else 0
    count = min(len(events) - start, stop - last)
    if count <= 0:
        return []
    if events[start + count - 1].seq_nr == last + count:  # in order: no hole, all of them
        return list(events[start : start + count])
    run = []
    for record in events[start : start + count]:
        if record.seq_nr != last + 1:
            break
        last = record.seq_nr
        run.append(record)
    return run


def _retrieve(task: asyncio.Future[FirstPage]) -> None:
    if not task.cancelled():
        task.exception()


class ReadingFlow:
    """The reading flow of one topic (see the module) over its parts: the partitioner, the
    store, the index, the fence and Kafka's records. `scan_without_store`: with the store
    down, a journal the index cannot give whole is read by a scan of its partition, not
    refused (a worker's, whose tables cannot tell after it took the partition over)."""

    def __init__(
        self,
        partition_of: Callable[[JournalKey], int],
        store: EventualJournal,
        index: RecordIndex,
        fence: Fence,
        kafka: KafkaRecords,
        scan_without_store: bool = False,
        cuts: Callable[[int, int], Awaitable[int | None]] | None = None,
        predecessor: Predecessor | None = None,
    ) -> None:
        """`cuts`: a grown topic's (journal/client/growing.py): the cut of a partition below a
        fence, where a view raises JournalMoved. `predecessor`: the old topic of a grown one,
        where a journal without a row here takes its base from."""
        self.partition_of = partition_of
        self.store = store
        self.index = index
        self.fence = fence
        self.kafka = kafka
        self._scan_without_store = scan_without_store
        self._scans = asyncio.Semaphore(DEFAULT_MAX_KAFKA_ONLY_SCANS)
        self._max_scans = DEFAULT_MAX_KAFKA_ONLY_SCANS
        self._cuts = cuts
        self.predecessor = predecessor

    def limit_scans(self, max_scans: int) -> None:
        """At most `max_scans` scans without the store at once (`KJ_MAX_KAFKA_ONLY_SCANS`)."""
        self._scans, self._max_scans = asyncio.Semaphore(max_scans), max_scans

    async def check_cut(self, key: JournalKey, partition: int, fence: int) -> None:
        """JournalMoved if a grow cut the partition below `fence` (docs/growing.md)."""
        if self._cuts is not None:
            cut = await self._cuts(partition, fence)
            if cut is not None:
                raise JournalMoved(key, cut)

    async def head(
        self, key: JournalKey, until: int | None = None, index: RecordIndex | None = None
    ) -> JournalHead:
        """The journal's state and unreplicated events as of now or `until` (`view`)."""
        return (await self.view(key, until, index)).head

    async def event(self, key: JournalKey, seq_nr: int) -> EventRecord | None:
        """The journal's event at `seq_nr`, if it has one (deleted: none)."""
        async for record in self.read(key, seq_nr, seq_nr, 1):
            return record
        return None

    async def view(
        self,
        key: JournalKey,
        until: int | None = None,
        index: RecordIndex | None = None,
        opener: Opener | None = None,
    ) -> JournalView:
        """The journal as of now: the reading flow's steps 1-3 (see the module); or as of
        `until`, an offset of its partition (the fence: the records below it). `index`: one
        other than this client's (a worker's conditional appends ask their own). `opener`: a
        read's, of the journal's data key: the head's events opened as they are decoded."""
        index = self.index if index is None else index
        partition = self.partition_of(key)
        covered = index.covered(partition)  # the row read next reflects at least this
        meta_read = asyncio.ensure_future(self.store.meta(key))
        try:
            fence = await self.fence.fence(key, partition) if until is None else until
            found = await index.lookup(key, partition, fence)
            await self.check_cut(key, partition, fence)
        except BaseException:
            meta_read.cancel()
            raise
        try:
            meta = await meta_read
            if isinstance(found, Indexed) and found.needs > covered:
                meta = await self.store.meta(key)  # the index dropped what that row may lack
        except StoreUnavailable as error:
            if self.predecessor is not None:
                return await self._moved_without_store(key, partition, fence, found, error, opener)
            return await self._view_without_store(key, partition, fence, found, error, opener)
        before = None
        if self.predecessor is not None and (meta is None or meta.base > 0):
            # moved here by a grow: not replicated here yet (its base is OLD's, to the cut), or
            # replicated with its events in OLD up to the row's base, read there
            before = await self.predecessor.view(key, opener)
        view = await self._view_found(key, partition, fence, found, meta, covered, before, opener)
        return view if before is None else replace(view, before=before)

    async def _view_found(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        found: IndexAnswer,
        meta: JournalMeta | None,
        covered: int,
        before: JournalView | None,
        opener: Opener | None,
    ) -> JournalView:
        base = JournalState() if before is None else rebased(before.head.state)
        try:
            if isinstance(found, Indexed):
                return await self._view_indexed(
                    key, partition, fence, found, meta, covered, base, opener
                )
            return await self._view_scanned(key, partition, fence, found.reason, base, opener)
        except StoreUnavailable as error:
            if before is not None:
                return await self._moved_without_store(key, partition, fence, found, error, opener)
            return await self._view_without_store(
                key, partition, fence, found, error, opener=opener
            )

    async def _moved_without_store(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        found: IndexAnswer,
        error: StoreUnavailable,
        opener: Opener | None,
    ) -> JournalView:
        """A grown topic's journal from Kafka alone: its view in the old topic up to the cut
        (Kafka alone there too, or StoreUnavailable), as the base its whole history here folds
        onto (`_view_without_store`)."""
        assert self.predecessor is not None
        before = await self.predecessor.view(key, opener)
        base = rebased(before.head.state)
        view = await self._view_without_store(key, partition, fence, found, error, opener, base)
        return replace(view, before=before)

    async def _view_indexed(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        found: Indexed,
        meta: JournalMeta | None,
        covered: int,
        base: JournalState,
        opener: Opener | None,
    ) -> JournalView:
        base = base if meta is None else meta.state
        # the row reflects everything of the journal up to its offset, to `needs` and to
        # `covered` (read before it): the index keeps runs replication covered, not fetched here
        after = max(base.offset, found.needs, covered)
        runs = [r for r in found.runs if r.last > after and r.first < fence]
        if not runs:
            METRICS.counter("kafka_journal_reads_total", path="store").inc()
            return JournalView(partition, meta, JournalHead.of_store(base))
        METRICS.counter("kafka_journal_reads_total", path="index").inc()
        actions = self.kafka.fetch(key, partition, runs, after, fence)
        head = await fold_head(base, actions, self.kafka.config.head_budget_bytes, opener)
        return JournalView(partition, meta, head)

    async def _view_scanned(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        reason: str,
        base: JournalState,
        opener: Opener | None,
    ) -> JournalView:
        METRICS.counter("kafka_journal_reads_total", path=f"scan_{reason}").inc()
        pointer = await self.store.pointer(key.topic, partition)
        meta = await self.store.meta(key)  # after the pointer: it reflects at least that much
        base = base if meta is None else meta.state
        # nothing replicated: the journal's records are needed from offset 0, whatever the
        # log start is (`None` would start at the log start and miss an expiry)
        actions = self.kafka.scan(key, partition, -1 if pointer is None else pointer, fence)
        head = await fold_head(base, actions, self.kafka.config.head_budget_bytes, opener)
        return JournalView(partition, meta, head)

    async def _view_without_store(
        self,
        key: JournalKey,
        partition: int,
        fence: int,
        found: IndexAnswer,
        error: StoreUnavailable,
        opener: Opener | None = None,
        base: JournalState = JournalState(),  # noqa: B008 (frozen: shared safely)
    ) -> JournalView:
        """Kafka alone, when it provably holds the whole journal (invariant 5): by the index's
        runs when they are the whole journal; else, where `scan_without_store` (a worker, whose
        tables cannot tell after it took the partition over), by a scan from offset 0, whose
        cost is the retained log's; else StoreUnavailable, saying why. `base`: the state its
        first record here folds onto (a moved journal's in the old topic)."""
        budget = self.kafka.config.head_budget_bytes
        head: JournalHead | None
        if isinstance(found, Indexed) and found.complete:
            path = "kafka_only_index"
            head = await self._whole_by_runs(key, partition, found.runs, fence, base, opener)
        elif self._scan_without_store and not (
            isinstance(found, NotIndexed) and found.reason == BEHIND
        ):
            if self._scans.locked():
                METRICS.counter("kafka_journal_reads_total", path="kafka_only_busy").inc()
                raise StoreUnavailable(
                    f"{error}; {key} needs a scan of partition {partition}, and "
                    f"{self._max_scans} scans are running already"
                ) from error
            path = "kafka_only_scan"
            async with self._scans:
                actions = self.kafka.scan(key, partition, None, fence)
                if await self.kafka.log_start(key.topic, partition) == 0:
                    head = await fold_head(base, actions, budget, opener)
                else:
                    head = await fold_whole(actions, budget, opener)
        else:
            METRICS.counter("kafka_journal_reads_total", path="kafka_only_refused").inc()
            why = (
                f"the index cannot tell ({found.reason})"
                if not isinstance(found, Indexed)
                else f"the index no longer holds its records up to offset {found.needs}"
            )
            raise StoreUnavailable(
                f"{error}; {key} cannot be read from Kafka alone: {why}, and a read does not "
                f"scan partition {partition}"
            ) from error
        if head is None:
            METRICS.counter("kafka_journal_reads_total", path="kafka_only_refused").inc()
            raise StoreUnavailable(f"{error}; Kafka alone no longer holds all of {key}") from error
        METRICS.counter("kafka_journal_reads_total", path=path).inc()
        return JournalView(partition, None, head)

    async def _whole_by_runs(
        self,
        key: JournalKey,
        partition: int,
        runs: Sequence[OffsetRun],
        fence: int,
        base: JournalState,
        opener: Opener | None,
    ) -> JournalHead | None:
        """The journal from its runs, all of its records, folded onto `base`: None when Kafka
        no longer holds enough of them to tell."""
        budget = self.kafka.config.head_budget_bytes
        try:
            actions = self.kafka.fetch(key, partition, runs, -1, fence)
            return await fold_head(base, actions, budget, opener)
        except JournalTruncated:
            # some of its records expired: only a Purge among those left proves its start
            start = await self.kafka.log_start(key.topic, partition)
            try:
                return await fold_whole(
                    self.kafka.fetch(key, partition, runs, start - 1, fence), budget, opener
                )
            except JournalTruncated:
                return None  # the log start moved on meanwhile

    async def fetch_events(
        self,
        key: JournalKey,
        partition: int,
        offsets: Sequence[int],
        opener: Opener | None = None,
    ) -> AsyncIterator[EventRecord]:
        """The events of the Appends at `offsets` (known to be `key`'s), fetched again (opened
        with `opener` as they are decoded)."""
        runs = [OffsetRun(o, o, 1) for o in offsets]
        async for action in self.kafka.fetch(key, partition, runs, offsets[0] - 1, offsets[-1] + 1):
            for record in events_of(action, opener):
                yield record

    async def read(
        self, key: JournalKey, from_: int = 1, to: int = SEQ_NR_MAX, limit: int | None = None
    ) -> AsyncIterator[EventRecord]:
        """Stream the journal's events in [from_, to], at most `limit`, in seqNr order: step 4,
        after steps 1-3 (`view`)."""
        async for batch in self.read_batches(key, from_, to, limit):
            for record in batch:
                yield record

    async def read_batches(
        self,
        key: JournalKey,
        from_: int = 1,
        to: int = SEQ_NR_MAX,
        limit: int | None = None,
        opener: Opener | None = None,
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, a non-empty list of events at a time as the flow gets them: a page of the
        store's, the head's events, a fetch of the events it spilled. `opener`: the journal's
        data key's (`Encryption.read_batches` decides it): every event is decoded with it, its
        sealed payload opened as it is built (EnvelopeRefused where one does not open)."""
        check_seq_nr(from_, "from")
        check_seq_nr(to, "to")
        if limit is not None and limit < 0:
            raise InvalidValue(f"limit must not be negative, got {limit}")
        # the first page of stored events is asked with the fence and the row, not after them
        page = asyncio.ensure_future(self.store.first_page(key, from_, to, opener))
        page.add_done_callback(_retrieve)  # a page nobody needs may fail unseen
        try:
            view = await self.view(key, opener=opener)
        except BaseException:
            page.cancel()
            raise
        remaining = SEQ_NR_MAX if limit is None else limit
        try:
            async for batch in self._batches(key, view, from_, to, page, opener):
                if remaining <= 0:
                    return
                if len(batch) > remaining:
                    batch = batch[:remaining]
                remaining -= len(batch)
                yield batch
                if remaining == 0:
                    return
        finally:
            page.cancel()  # not needed (a purged or unknown journal), or the reader left early

    async def _batches(
        self,
        key: JournalKey,
        view: JournalView,
        from_: int,
        to: int,
        page: Awaitable[FirstPage],
        opener: Opener | None,
    ) -> AsyncIterator[list[EventRecord]]:
        """The store's events above deleteTo (unless the head purged them), then the head's;
        each list non-empty. A moved journal's events in the old topic come first (above this
        view's deleteTo; none after a Purge here)."""
        head, meta = view.head, view.meta
        last = max(head.state.delete_to, from_ - 1)
        if view.before is not None and not head.purged and self.predecessor is not None:
            old, flow = self.predecessor.key_of(key), self.predecessor.flow
            stop = min(to, view.before.head.state.seq_nr)
            if last < stop:
                old_page = asyncio.ensure_future(flow.store.first_page(old, last + 1, stop, opener))
                old_page.add_done_callback(_retrieve)
                try:
                    before = flow._batches(old, view.before, last + 1, stop, old_page, opener)
                    async for batch in before:
                        last = batch[-1].seq_nr
                        yield batch
                finally:
                    old_page.cancel()
        if meta is not None and not head.purged:
            stop = min(to, meta.seq_nr or 0)
            first = await page
            if first.fits(meta):
                batch = _continuing(first.events, last, stop)
                if batch:
                    last = batch[-1].seq_nr
                    yield batch
            if last < stop:
                rest = replace(meta, delete_to=last)
                pages = self.store.read_pages(key, rest, last + 1, to, opener)
                async for stored in pages:
                    batch = []
                    for record in stored:
                        if record.seq_nr > last:  # strictly increasing, whatever the store says
                            last = record.seq_nr
                            batch.append(record)
                    if batch:
                        yield batch
        async for held in self._head_batches(key, view, opener):
            batch = []
            for record in held:
                if last < record.seq_nr <= to:
                    last = record.seq_nr
                    batch.append(record)
            if batch:
                yield batch

    async def _head_batches(
        self, key: JournalKey, view: JournalView, opener: Opener | None
    ) -> AsyncIterator[Sequence[EventRecord]]:
        """The head's events: those it holds, then those it spilled, fetched a few at a time."""
        if view.head.refused is not None:  # one of those held did not open (`fold_head`)
            raise view.head.refused
        yield view.head.events
        spilled = view.head.spilled
        if spilled:
            METRICS.counter("kafka_journal_reads_spilled_total").inc()
        for start in range(0, len(spilled), _SPILL_FETCH):
            offsets = spilled[start : start + _SPILL_FETCH]
            fetched = self.fetch_events(key, view.partition, offsets, opener)
            yield [record async for record in fetched]
