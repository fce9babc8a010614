"""Conditional appends and idempotent retries: the writer asks, the log decides.

**The condition is the record's range.** An append expecting the journal's last seqNr to be
`n` must start at `n + 1` (anything else is refused before producing: it could never be
accepted). The fold's conflict rule accepts an Append only if it starts at last + 1, so the
expectation is already in the record, in kafka-journal's own `journal.action` header, and every
fold (reads, replication, Spark, audit) applies it. A second statement of it (a header of ours)
could only disagree with the range.

**The protocol** (`ConditionalAppends.append`), per journal, serialised in this process:
1. look at the journal (the reading flow): not at `n` -> a retry of ours? (below) else conflict,
   nothing produced;
2. produce the record (at offset `o`);
3. read the journal up to and including `o` (the index asked first waits until it has seen
   `o`: the direct client's tail index, or a worker's tail of the partitions it owns) and take
   the fold's verdict: the state changed at `o` -> accepted (200); it did
   not -> rejected (409 with the last seqNr as of `o`). A failure between 2 and the verdict is
   `OutcomeUnknown` (503): the record is wholly accepted or wholly rejected, never half.
A zombie (an old owner, or any other process) may produce a doomed record, but its verdict,
taken from the log, rejects it: a rival's record that made it impossible is earlier in the log.

**What it costs.** A verdict read would cost a fetch from Kafka (and the look before producing
another read). So the process remembers, per journal (bounded, least recently used), the state
the last verdict found and the offset it is as of. The look before producing is skipped when
that state already meets the expectation (a stale memory costs a doomed record at worst, never a
wrong answer: only the verdict answers). The verdict is taken without fetching from Kafka when
the index (which first waits until it has seen our record) lists exactly one record of the
journal after the remembered offset, or else after what the store's row reflects: ours, folded
onto that state with the same `apply`. Anything else (a rival's record, a Delete, runs that
span other journals) takes the full reading flow.

**Idempotency keys** travel in the record too, in two headers of ours (the key and a digest of
the request), which kafka-journal readers keep as plain user headers. A retry finds the first
attempt where it can only be: the journal's event at the request's first seqNr (one event
read, store or head, on any worker, after any failover). Same key and digest -> the first
attempt's position, nothing produced; same key, other digest -> `IdempotencyKeyReused`. So no
table of keys is kept anywhere: a key is remembered as long as its event is (until deleted).

**Appends at the end** (`ConditionalAppends.append_at_end`) are numbered here, under the
journal's lock: look at the journal's last seqNr (the remembered state when the index shows
nothing newer, else the reading flow), number the events from last + 1, produce, take the
verdict. Writers through one process so never conflict; a rival outside it (another process)
can make an attempt lose, and nothing of a lost attempt is visible, so it looks again and
retries, `AT_END_ATTEMPTS` times at most (then SeqNrConflict). With an expected seqNr `n` it is
a conditional append from `n + 1`.

Unkeyed appends at the end of one journal are taken in rounds (`_AtEndRounds`): the appends
that arrive while a round is in flight wait for the next, which numbers them one after the
other from one look, produces them together (one record batch, in their order) and takes their
verdicts in log order, each folded in memory onto the one before. So a busy journal costs one
look, one produce round trip and one wait for the tail per round, not per append (measured: the
produce and the tail's sight of the record are each ~1 ms here; queued behind one another, eight
writers spent ~40 ms each per append). A record that lands out of order (it cannot here: the
records join the batch in the order they are given) would only be rejected and numbered again.

An unkeyed append at the end is not safe to repeat after `OutcomeUnknown`: the repeat is
numbered anew, so it is appended twice if the first took effect (the error says so:
`repeatable`). So the direct client gives an append at the end a fresh key by default
(`FreshKey`): a key made for the call has no earlier attempt, so nothing is searched, and a
repeat carries it (`OutcomeUnknown.idempotency_key`) and finds its first attempt as below.

A keyed append at the end has no seqNr to find its first attempt at, so a retry searches (and
so does a first attempt with a key of the caller's: nothing tells it from a retry after a
crash):
1. this process's memory of its recent keyed appends at the end (bounded, least recently used
   out): an accepted one answers; one whose outcome was unknown is retried at the same seqNrs,
   so that the log accepts at most one of the two (the event there tells which);
2. else the journal's newest events (the reading flow: store and head), newest chunk first,
   back to one older than `retry_window_s`, to seqNr 1 or to the deleted events, at most
   `search_events` events: an event carrying the key answers (its Append's position and range).
Deleted events end the search as the journal's start does: a key is remembered as long as its
event is, at the end as with seqNrs (`_earlier` finds no deleted event either), and no read
can tell what a deleted event held. So an attempt whose events a Delete removed is forgotten
with them, and its retry appends the events again, above them: a Delete reaches an attempt only
once it was accepted and only up to seqNrs someone deleting chose, so it is the deleter's word
that the events are done with. Refusing instead refused every keyed append at the end of a
journal whose deleted events were younger than the window, first attempts included.
Not found within those bounds, the search cannot tell (`IdempotencyUnresolved`, nothing
produced): the journal's newest events, above the deleted ones, are all younger than the
window and more than `search_events` (a busy journal). The limits, honestly: a retry later
than `retry_window_s` after the first attempt (by the records' timestamps: clocks of
producers) is a new request; a retry after a Delete removed its first attempt appends again;
and a first attempt still in flight in another process's producer (a former owner's) when the
retry searches may land after it, both accepted.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from journal.client.reading import ReadingFlow
from journal.core.fold import JournalState
from journal.core.index import Indexed, OffsetRun, RecordIndex
from journal.core.model import (
    ActionHeader,
    Appended,
    AppendHeader,
    Deleted,
    DeleteHeader,
    EventRecord,
    HeaderMetadata,
    JournalKey,
    Position,
    SeqRange,
)
from journal.errors import (
    AccessDenied,
    IdempotencyKeyReused,
    IdempotencyUnresolved,
    InvalidValue,
    JournalTruncated,
    OutcomeUnknown,
    SeqNrConflict,
    StoreUnavailable,
    Unavailable,
)
from journal.kafka.driver_errors import KafkaError
from journal.metrics import METRICS

IDEMPOTENCY_KEY_HEADER = "journal.idempotency-key"
REQUEST_DIGEST_HEADER = "journal.request-digest"
#: record headers a user may not set: they would pass for another request's key
CONDITIONAL_HEADERS = frozenset({IDEMPOTENCY_KEY_HEADER, REQUEST_DIGEST_HEADER})
MAX_IDEMPOTENCY_KEY = 255  # characters; printable ASCII
AT_END_ATTEMPTS = 8  # an append at the end, numbered again after a rival took the end
_SEARCH_FIRST = 32  # events: the newest chunk a keyed append at the end searches first

# Failures after which a produced record's fate is not known here
_UNSURE: tuple[type[BaseException], ...] = (KafkaError, Unavailable, TimeoutError, ConnectionError)
_VERDICT_UNKNOWN: tuple[type[BaseException], ...] = (*_UNSURE, JournalTruncated)


def check_idempotency_key(key: str) -> str:
    if not 0 < len(key) <= MAX_IDEMPOTENCY_KEY or not (key.isascii() and key.isprintable()):
        raise InvalidValue(
            f"an idempotency key is 1..{MAX_IDEMPOTENCY_KEY} printable ASCII characters"
        )
    return key


class FreshKey(Enum):
    """`Journal.append_at_end`'s default idempotency key: a new one for the call
    (`new_idempotency_key`), so that its append is safe to repeat with it."""

    FRESH = "fresh"


def new_idempotency_key() -> str:
    return uuid.uuid4().hex  # random: no other request's key, in any process


@dataclass(frozen=True, slots=True)
class Idempotency:
    """A request's idempotency key and the digest of what it asks; `fresh`: a key made for
    this call (`FreshKey`), so no earlier attempt of it can exist and none is searched for."""

    key: str
    digest: str
    fresh: bool = False

    @classmethod
    def of_request(
        cls,
        key: str,
        value: bytes,
        header_metadata: HeaderMetadata,
        headers: Mapping[str, str],
        at_end: bool = False,
        fresh: bool = False,
    ) -> Idempotency:
        """The digest covers the encoded events with their metadata (`value`, deterministic;
        for an append at the end, the events numbered from 1, and that it is one) and the
        user's headers and header metadata: everything a read would return."""
        digest = hashlib.sha256(value)
        digest.update(repr((header_metadata.data, sorted(headers.items()), at_end)).encode())
        return cls(check_idempotency_key(key), digest.hexdigest(), fresh)

    @classmethod
    def of_record(cls, record: EventRecord) -> Idempotency | None:
        key = record.headers.get(IDEMPOTENCY_KEY_HEADER)
        digest = record.headers.get(REQUEST_DIGEST_HEADER)
        return None if key is None or digest is None else cls(key, digest)

    def headers(self) -> dict[str, str]:
        return {IDEMPOTENCY_KEY_HEADER: self.key, REQUEST_DIGEST_HEADER: self.digest}


class JournalLocks:
    """One asyncio lock per journal, held only while some request holds or awaits it, so the
    map is bounded by the requests in flight."""

    def __init__(self) -> None:
        self._locks: dict[JournalKey, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    def __contains__(self, key: JournalKey) -> bool:
        """Whether some request holds or awaits the journal's lock."""
        return key in self._locks

    def hold(self, key: JournalKey) -> _Held:
        """`async with locks.hold(key):` the journal's lock, held in the block."""
        return _Held(self._locks, key)


class _Held:
    """`JournalLocks.hold`'s context manager: a class, not a generator's (once per append)."""

    __slots__ = ("_key", "_locks")

    def __init__(self, locks: dict[JournalKey, tuple[asyncio.Lock, int]], key: JournalKey) -> None:
        self._locks = locks
        self._key = key

    async def __aenter__(self) -> None:
        lock, users = self._locks.get(self._key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[self._key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._leave()
            raise

    async def __aexit__(self, *_: object) -> None:
        self._locks[self._key][0].release()
        self._leave()

    def _leave(self) -> None:
        lock, users = self._locks[self._key]
        if users == 1:
            del self._locks[self._key]
        else:
            self._locks[self._key] = (lock, users - 1)


Produce = Callable[[Mapping[str, str]], Awaitable[Position]]
#: the events of an append at the end numbered from a seqNr: the Append's header and producer
Numbered = Callable[[int], tuple[AppendHeader, Produce]]


def records_between(runs: Sequence[OffsetRun], after: int, upto: int) -> int | None:
    """How many of a journal's records lie in (after, upto], or None if the runs cannot tell
    (a run that spans other journals' records and the range's edge)."""
    total = 0
    for run in reversed(runs):  # ascending: the newest few are the ones after `after`
        if run.last <= after:
            break
        low, high = max(run.first, after + 1), min(run.last, upto)
        if low > high:
            continue
        if run.exact:
            total += high - low + 1
        elif (low, high) == (run.first, run.last):
            total += run.count
        else:
            return None
    return total


@dataclass(frozen=True, slots=True)
class KnownState:
    """A journal's state as of offset `as_of` (every record up to it folded), from a verdict."""

    state: JournalState
    as_of: int


class KnownStates:
    """The last verdict's state per journal, least recently used first out."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._known: OrderedDict[JournalKey, KnownState] = OrderedDict()

    def get(self, key: JournalKey) -> KnownState | None:
        known = self._known.get(key)
        if known is not None:
            self._known.move_to_end(key)
        return known

    def put(self, key: JournalKey, known: KnownState) -> None:
        current = self._known.get(key)
        if current is not None and current.as_of > known.as_of:
            known = current  # a look that raced a verdict knows less: keep the newer
        self._known[key] = known
        self._known.move_to_end(key)
        if len(self._known) > self._capacity:
            self._known.popitem(last=False)


@dataclass(frozen=True, slots=True)
class KeyedAttempt:
    """A keyed append at the end made here: its digest, the seqNrs it was given and its answer
    once accepted (None: its outcome is unknown)."""

    digest: str
    seq_nrs: SeqRange
    appended: Appended | None


class KeyedAttempts:
    """This process's recent keyed appends at the end, by journal and key, least recently used
    first out."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._attempts: OrderedDict[tuple[JournalKey, str], KeyedAttempt] = OrderedDict()

    def get(self, key: JournalKey, idempotency_key: str) -> KeyedAttempt | None:
        attempt = self._attempts.get((key, idempotency_key))
        if attempt is not None:
            self._attempts.move_to_end((key, idempotency_key))
        return attempt

    def put(self, key: JournalKey, idempotency_key: str, attempt: KeyedAttempt) -> None:
        self._attempts[key, idempotency_key] = attempt
        self._attempts.move_to_end((key, idempotency_key))
        if len(self._attempts) > self._capacity:
            self._attempts.popitem(last=False)


@dataclass(eq=False, slots=True)
class _AtEnd:
    """An unkeyed append at the end waiting for its round: `number` encodes its `count` events
    from a seqNr; `answer` is its outcome."""

    count: int
    number: Numbered
    answer: asyncio.Future[Appended]


class _AtEndRounds:
    """Per journal, the unkeyed appends at the end waiting for the next round, while a task
    runs the rounds (a task, so a caller that gives up stops no one else's round)."""

    def __init__(self) -> None:
        self._waiting: dict[JournalKey, list[_AtEnd]] = {}
        self._runners: set[asyncio.Task[None]] = set()

    def join(
        self,
        key: JournalKey,
        request: _AtEnd,
        run: Callable[[JournalKey, list[_AtEnd]], Awaitable[None]],
    ) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.append(request)  # a runner is on it: the next round takes it
            return
        self._waiting[key] = [request]
        runner = asyncio.create_task(self._run(key, run))
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)

    async def _run(
        self, key: JournalKey, run: Callable[[JournalKey, list[_AtEnd]], Awaitable[None]]
    ) -> None:
        try:
            while requests := self._waiting[key]:
                self._waiting[key] = []
                try:
                    await run(key, requests)
                except BaseException as error:  # every caller gets an answer
                    for request in requests:
                        _answer(request, error)
                    if not isinstance(error, Exception):
                        raise
        finally:
            # no await since the loop found the list empty: no request can be left behind
            for request in self._waiting.pop(key):
                _answer(request, Unavailable(f"{key}: appends at the end stopped"))


def _answer(request: _AtEnd, outcome: Appended | BaseException) -> None:
    if request.answer.done():
        return  # its caller gave up (cancelled)
    if isinstance(outcome, BaseException):
        request.answer.set_exception(outcome)
    else:
        request.answer.set_result(outcome)


class ConditionalAppends:
    """The protocol of the module, over one process's reading flow (its partitioner, fence,
    store and reads) and the index its verdicts ask (`index`: the flow's own, or a worker's
    tail of the partitions it owns)."""

    def __init__(
        self,
        reading: ReadingFlow,
        index: RecordIndex,
        remembered: int = 10_000,
        retry_window_s: float = 600.0,
        search_events: int = 4096,
    ) -> None:
        self._reading = reading
        self._index = index  # asked for verdicts; the reading flow asks its own
        self._locks = JournalLocks()
        self._known = KnownStates(remembered)
        self._attempts = KeyedAttempts(remembered)
        self._rounds = _AtEndRounds()
        # from the produce to the fold's verdict, as the append waits for it (issue 27's goal)
        self._to_verdict = METRICS.histogram("kafka_journal_conditional_verdict_seconds")
        # by whether the verdict needed a read (path "read") or not ("memory"): once per append
        self._verdicts = {
            read: METRICS.counter(
                "kafka_journal_conditional_verdicts_total", path="read" if read else "memory"
            )
            for read in (True, False)
        }
        self._retry_window = timedelta(seconds=retry_window_s)
        self._search_events = search_events

    async def append(
        self,
        key: JournalKey,
        header: AppendHeader,
        expected_seq_nr: int | None,
        idempotency: Idempotency | None,
        produce: Produce,
    ) -> Appended:
        """Append through `produce` (given the extra record headers) if the journal is at
        `expected_seq_nr` (None: unconditional, produced whatever the journal's state);
        `header` is the Append's, as produced."""
        return Appended.at(
            await self._append(key, header, expected_seq_nr, idempotency, produce), header.range
        )

    async def _append(
        self,
        key: JournalKey,
        header: AppendHeader,
        expected_seq_nr: int | None,
        idempotency: Idempotency | None,
        produce: Produce,
    ) -> Position:
        first = header.range.from_
        if expected_seq_nr is not None and expected_seq_nr != first - 1:
            raise InvalidValue(
                f"expectedSeqNr {expected_seq_nr} cannot be met by events from seqNr {first}: "
                f"it must be {first - 1}"
            )
        extra = idempotency.headers() if idempotency is not None else {}
        if expected_seq_nr is not None and key in self._locks and not self._continues(key, first):
            # writers racing on the journal here: a doomed append is refused from a look of
            # its own (as of a moment within the request) instead of queueing for the lock
            earlier = await self._check(key, first, expected_seq_nr, idempotency)
            if earlier is not None:
                return earlier
        async with self._locks.hold(key):
            # as far as this process knows it continues the journal: no look, the verdict tells
            # (an unconditional append gets no verdict: with a key, it always looks)
            continues = expected_seq_nr is not None and self._continues(key, first)
            if not continues and (expected_seq_nr is not None or idempotency is not None):
                earlier = await self._check(key, first, expected_seq_nr, idempotency)
                if earlier is not None:
                    return earlier
            if expected_seq_nr is None:
                return await produce(extra)
            started = time.perf_counter()
            try:
                position = await produce(extra)
            except AccessDenied:
                raise  # refused before anything was written: it says which right is missing
            except _UNSURE as error:
                raise OutcomeUnknown(
                    f"{key}: the append may or may not be written: {error!r}"
                ) from error
            rejected_at = await self._verdict(key, header, position)
            self._to_verdict.observe(time.perf_counter() - started)
            if rejected_at is None:
                return position
            earlier = await self._earlier(key, first, rejected_at, idempotency)
            if earlier is not None:
                return earlier  # a zombie's copy of our own first attempt won: that one holds
            raise SeqNrConflict(rejected_at, expected_seq_nr)

    async def append_at_end(
        self,
        key: JournalKey,
        count: int,
        number: Numbered,
        expected_seq_nr: int | None,
        idempotency: Idempotency | None,
    ) -> Appended:
        """Append `count` events numbered here from the journal's last seqNr + 1 (`number`
        encodes them from a seqNr); with `expected_seq_nr`, only if the journal is at it (see the
        module). A keyed retry answers its first attempt, found as the module says."""
        if expected_seq_nr is not None:
            header, produce = number(expected_seq_nr + 1)
            return await self.append(key, header, expected_seq_nr, idempotency, produce)
        if idempotency is None:
            request = _AtEnd(count, number, asyncio.get_running_loop().create_future())
            self._rounds.join(key, request, self._at_end_round)
            return await request.answer
        async with self._locks.hold(key):
            pinned: SeqRange | None = None
            if idempotency is not None:
                attempt = self._attempts.get(key, idempotency.key)
                if attempt is None:
                    # a fresh key has no earlier attempt (a repeat carries it unfresh)
                    found = (
                        None if idempotency.fresh else await self._search(key, idempotency, count)
                    )
                    if found is not None:
                        return found
                elif attempt.digest != idempotency.digest:
                    raise IdempotencyKeyReused(
                        f"idempotency key {idempotency.key!r} was used for another request "
                        f"(the events {attempt.seq_nrs.from_}..{attempt.seq_nrs.to})"
                    )
                elif attempt.appended is not None:
                    return attempt.appended
                else:
                    pinned = attempt.seq_nrs  # its outcome is unknown: the same seqNrs again
            extra = idempotency.headers() if idempotency is not None else {}
            last = first = 0
            for _ in range(AT_END_ATTEMPTS):
                last = (await self.look(key)).seq_nr
                first = last + 1
                if pinned is not None:
                    if last >= pinned.from_:
                        earlier = await self._earlier(key, pinned.from_, last, idempotency)
                        if earlier is not None:
                            return self._accepted(key, idempotency, Appended.at(earlier, pinned))
                    elif last == pinned.from_ - 1:
                        first = pinned.from_
                    pinned = None  # else another's events hold its seqNrs: it never can
                header, produce = number(first)
                try:
                    position = await produce(extra)
                except AccessDenied:
                    raise  # refused before anything was written
                except _UNSURE as error:
                    self._unsure(key, idempotency, header.range)
                    raise OutcomeUnknown(
                        f"{key}: the append may or may not be written: {error!r}",
                        idempotency_key=idempotency.key,
                    ) from error
                try:
                    rejected_at = await self._verdict(key, header, position)
                except OutcomeUnknown as error:
                    self._unsure(key, idempotency, header.range)
                    error.idempotency_key = idempotency.key  # the one a repeat must carry
                    raise
                if rejected_at is None:
                    appended = Appended.at(position, header.range)
                    return self._accepted(key, idempotency, appended)
                earlier = await self._earlier(key, first, rejected_at, idempotency)
                if earlier is not None:  # a copy of our own unsure attempt won
                    return self._accepted(key, idempotency, Appended.at(earlier, header.range))
                # a rival outside this process took the end: nothing of ours is visible
                last = rejected_at
            raise SeqNrConflict(last, first - 1)

    async def _at_end_round(self, key: JournalKey, requests: list[_AtEnd]) -> None:
        """Number `requests` one after the other from the journal's end, produce them together
        and take their verdicts in log order; the rejected ones (a rival outside this process
        took the end) are numbered again, `AT_END_ATTEMPTS` rounds at most."""
        async with self._locks.hold(key):
            last = first = 0
            for _ in range(AT_END_ATTEMPTS):
                last = (await self.look(key)).seq_nr
                first = last + 1
                numbered: list[tuple[_AtEnd, AppendHeader, Produce]] = []
                for request in requests:
                    header, produce = request.number(first)
                    numbered.append((request, header, produce))
                    first = header.range.to + 1
                # gather starts them in this order and each joins its partition's batch before
                # it first waits (journal/kafka/group_commit.py): the log keeps this order
                started = time.perf_counter()
                positions = await asyncio.gather(
                    *(produce({}) for _, _, produce in numbered), return_exceptions=True
                )
                rejected: list[_AtEnd] = []
                for (request, header, _), position in zip(numbered, positions, strict=True):
                    if isinstance(position, BaseException):
                        _answer(request, _produce_failed(key, position))
                        continue
                    try:
                        rejected_at = await self._verdict(key, header, position)
                    except OutcomeUnknown as error:
                        error.repeatable = False  # unkeyed at the end: a repeat numbers anew
                        _answer(request, error)
                        continue
                    self._to_verdict.observe(time.perf_counter() - started)
                    if rejected_at is None:
                        _answer(request, Appended.at(position, header.range))
                    else:
                        rejected.append(request)  # nothing of it is visible: number it again
                        last = rejected_at
                if not rejected:
                    return
                requests = rejected
            for request in requests:
                _answer(request, SeqNrConflict(last, first - 1))

    def _accepted(
        self, key: JournalKey, idempotency: Idempotency | None, appended: Appended
    ) -> Appended:
        if idempotency is not None:
            attempt = KeyedAttempt(idempotency.digest, appended.seq_nrs, appended)
            self._attempts.put(key, idempotency.key, attempt)
        return appended

    def _unsure(self, key: JournalKey, idempotency: Idempotency | None, seq_nrs: SeqRange) -> None:
        if idempotency is not None:
            attempt = KeyedAttempt(idempotency.digest, seq_nrs, None)
            self._attempts.put(key, idempotency.key, attempt)

    async def _search(
        self, key: JournalKey, idempotency: Idempotency, count: int
    ) -> Appended | None:
        """The first attempt of a keyed append at the end, from the journal's newest events
        (see the module); None if there was none within the bounds; IdempotencyUnresolved
        when the bounds cannot tell."""
        state = await self.look(key)
        # deleted events end the search: an attempt among them is forgotten (see the module)
        end, floor = state.seq_nr, state.delete_to + 1
        searched, span = 0, min(_SEARCH_FIRST, self._search_events)
        horizon = datetime.now(UTC) - self._retry_window
        while end >= floor:
            start = max(floor, end - span + 1)
            records = [record async for record in self._reading.read(key, start, end)]
            found = _first_attempt(records, idempotency, count)
            if found is not None:
                return found
            searched += end - start + 1
            if not records or records[0].event.seq_nr != start:
                return None  # deleted since the look: forgotten as well
            if start == floor or _utc(records[0].timestamp) < horizon:
                return None  # the journal's start or its deleted events, or older than any retry
            if searched >= self._search_events:
                raise IdempotencyUnresolved(
                    f"idempotency key {idempotency.key!r}: the journal's newest events (back to "
                    f"seqNr {start}, {searched} events within the retry window) hold no earlier "
                    "attempt, and older ones may: append with expectedSeqNr, or a new key"
                )
            end, span = start - 1, min(span * 4, self._search_events - searched)
        return None  # an empty journal, or deleted to its end

    def _continues(self, key: JournalKey, first: int) -> bool:
        """Whether, as far as this process knows, events from `first` continue the journal."""
        known = self._known.get(key)
        return known is not None and known.state.seq_nr == first - 1

    async def _check(
        self,
        key: JournalKey,
        first: int,
        expected_seq_nr: int | None,
        idempotency: Idempotency | None,
    ) -> Position | None:
        """Look at the journal before producing: None to go on (it continues the journal, or
        an unconditional append's key found no earlier attempt); the position of this
        request's own earlier attempt if one took effect; else `SeqNrConflict`."""
        last = (await self.look(key)).seq_nr
        if last == first - 1:
            return None
        earlier = await self._earlier(key, first, last, idempotency)
        if earlier is None and expected_seq_nr is not None:
            raise SeqNrConflict(last, expected_seq_nr)
        return earlier

    async def look(self, key: JournalKey) -> JournalState:
        """The journal as of now (a fence taken now), remembered with that fence: the last
        verdict's or look's state when the index shows no record of the journal since (no
        store read, no fetch: writers racing on a journal are mostly refused so, and a hot
        journal's pointer is read so), else the reading flow's (by this index where it follows
        the partition, else by the client's)."""
        partition = self._reading.partition_of(key)
        fence = await self._reading.fence.fence(key, partition)
        found = await self._index.lookup(key, partition, fence)
        await self._reading.check_cut(key, partition, fence)  # moved by a grow: redone there
        known = self._known.get(key)
        if (
            known is not None
            and known.as_of < fence
            and isinstance(found, Indexed)
            and found.needs <= known.as_of
            and records_between(found.runs, known.as_of, fence - 1) == 0
        ):
            self._known.put(key, KnownState(known.state, fence - 1))
            return known.state
        index = self._index if isinstance(found, Indexed) else None
        state = (await self._reading.head(key, until=fence, index=index)).state
        if state.offset < fence:  # else the store's row is past the fence: as of what, unsure
            self._known.put(key, KnownState(state, fence - 1))
        return state

    async def delete(self, key: JournalKey, header: DeleteHeader, produce: Produce) -> Deleted:
        """Produce the Delete and answer what the fold made of it where it landed: the
        journal's deleteTo as of the Delete's record (`min(to, last seqNr)` there, never less
        than before), which every read from then on honours (issue 46: a deleteTo decided
        from a look before producing could be stale, and the log placed the Delete later).
        Held under the journal's lock, so this process's appends and deletes of the journal
        are folded in the order they were produced."""
        async with self._locks.hold(key):
            try:
                position = await produce({})
            except AccessDenied:
                raise
            except _UNSURE as error:
                raise OutcomeUnknown(
                    f"{key}: the delete may or may not be written: {error!r}"
                ) from error
            try:
                state = await self._state_at(key, header, position)
            except _VERDICT_UNKNOWN as error:
                raise OutcomeUnknown(
                    f"{key}: the delete was written at offset {position.offset}; its deleteTo "
                    f"is unknown: {error!r}"
                ) from error
            if state.offset > position.offset:
                # replication stored records after ours already: the row cannot say what the
                # journal was at ours. The Delete took effect; repeating it is harmless
                raise OutcomeUnknown(
                    f"{key}: the delete was written at offset {position.offset}; its deleteTo "
                    "is unknown (replicated past it meanwhile): read the journal's deleteTo"
                )
            changed = state.offset == position.offset
            return Deleted(state.delete_to or None, position if changed else None)

    async def _state_at(
        self, key: JournalKey, header: ActionHeader, position: Position
    ) -> JournalState:
        """The journal as the fold leaves it at our record (`header` at `position`), every
        record up to it folded; or, when the store's row is past our record already, the
        row's state (its `offset` says so: as of when, the row cannot tell)."""
        offset = position.offset
        # a record after its partition's cut (a grow's Seal) took no effect: redone there
        await self._reading.check_cut(key, position.partition, offset + 1)
        state = await self._folded_in_memory(key, header, position)
        self._verdicts[state is None].inc()
        if state is None:
            state = (await self._reading.head(key, until=offset + 1, index=self._index)).state
        if state.offset <= offset:
            # the fold saw every record up to ours: ours changed the journal or nothing
            self._known.put(key, KnownState(state, offset))
        return state

    async def _verdict(
        self, key: JournalKey, header: AppendHeader, position: Position
    ) -> int | None:
        """None if the Append at `position` was accepted; else the last seqNr as of it."""
        offset, first = position.offset, header.range.from_
        try:
            state = await self._state_at(key, header, position)
            if state.offset <= offset:
                return None if state.offset == offset else state.seq_nr
            # the store's row is past our record already: its event at `first` tells
            found = await self._reading.event(key, first)
        except _VERDICT_UNKNOWN as error:
            raise OutcomeUnknown(f"{key}: the append's verdict is unknown: {error!r}") from error
        if found is not None and found.offset == offset:
            return None
        if found is None:
            raise OutcomeUnknown(f"{key}: seqNr {first} was deleted before its verdict was read")
        return state.seq_nr

    async def _folded_in_memory(
        self, key: JournalKey, header: ActionHeader, position: Position
    ) -> JournalState | None:
        """The journal's state as of our record without fetching it, when the index shows it
        is the journal's only record after a state known otherwise: the last verdict's, or
        else the store's row; None when it cannot tell."""
        offset = position.offset
        found = await self._index.lookup(key, position.partition, offset + 1)
        if not isinstance(found, Indexed):
            return None
        known = self._known.get(key)
        if known is not None and found.needs <= known.as_of < offset:
            base, after = known.state, known.as_of
        else:
            try:  # read after the lookup: the row reflects every record up to `needs`
                meta = await self._reading.store.meta(key)
            except StoreUnavailable:
                return None  # the reading flow knows how to do without the store
            if meta is None and self._reading.predecessor is not None:
                return None  # its base is the old topic's: the reading flow folds it
            base = JournalState() if meta is None else meta.state
            after = max(base.offset, found.needs)
            if after >= offset:
                return None  # the store has our record already: the reading flow tells
        if records_between(found.runs, after, offset) != 1:
            return None
        state, _ = base.apply(header, offset)
        return state

    async def _earlier(
        self, key: JournalKey, first: int, last: int, idempotency: Idempotency | None
    ) -> Position | None:
        """The position of this request's own earlier attempt, if one took effect."""
        if idempotency is None or last < first:
            return None
        found = await self._reading.event(key, first)
        stored = None if found is None else Idempotency.of_record(found)
        if found is None or stored is None or stored.key != idempotency.key:
            return None
        if stored.digest != idempotency.digest:
            raise IdempotencyKeyReused(
                f"idempotency key {idempotency.key!r} was used for another request "
                f"(the events from seqNr {first} at offset {found.offset})"
            )
        return Position(found.partition, found.offset)


def _produce_failed(key: JournalKey, error: BaseException) -> BaseException:
    """A produce's failure as its caller (an unkeyed append at the end) hears it: refused
    before anything was written (access denied, invalid) as it is; a failure after which the
    record's fate is unknown as `OutcomeUnknown`, not repeatable."""
    if isinstance(error, _UNSURE) and not isinstance(error, AccessDenied):
        unknown = OutcomeUnknown(
            f"{key}: the append may or may not be written: {error!r}", repeatable=False
        )
        unknown.__cause__ = error
        return unknown
    return error


def _first_attempt(
    records: Sequence[EventRecord], idempotency: Idempotency, count: int
) -> Appended | None:
    """The Append among `records` (seqNr order, the newest of the journal not searched yet)
    that carries the key: its position and range (its last event is among `records`: a newer
    chunk would have held it; it has `count` events, as the digest says);
    IdempotencyKeyReused for another request's digest."""
    for record in reversed(records):
        stored = Idempotency.of_record(record)
        if stored is None or stored.key != idempotency.key:
            continue
        if stored.digest != idempotency.digest:
            raise IdempotencyKeyReused(
                f"idempotency key {idempotency.key!r} was used for another request "
                f"(the events to seqNr {record.event.seq_nr} at offset {record.offset})"
            )
        last = record.event.seq_nr
        return Appended.at(
            Position(record.partition, record.offset), SeqRange(last - count + 1, last)
        )
    return None


def _utc(timestamp: datetime) -> datetime:
    """The store's timestamps are UTC without saying so."""
    return timestamp if timestamp.tzinfo is not None else timestamp.replace(tzinfo=UTC)
