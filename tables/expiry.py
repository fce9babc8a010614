"""When journals expire: an accepted Append's `expireAfter` makes its journal expire that long
after the Append's record was written, and the owner of its partition purges it then
(`agents/expiry.py`).

The rule is kafka-journal's replicator's, over what the fold accepted only: the journal's last
accepted Append decides (its events' `expireAfter`, read from the record's payload metadata);
an accepted Append without one clears it; a Purge clears it. A journal appended again before its
deadline lives on, with a later one. A rejected Append (conflict rule, `journal/core/fold.py`)
has no effect on it: with verified appends the default, a writer answered 409 must not schedule
a Purge nor clear or move a real deadline.

The agent cannot tell an Append's verdict as it handles it (it keeps no fold state per journal),
so the table holds candidates, and the purger confirms them:
- the table keeps, per journal, the EARLIEST candidate deadline of any Append with an
  `expireAfter` since the journal's last Purge (accepted or not; an Append without one leaves it,
  a Purge clears it). So it is never later than the true deadline, when there is one;
- when a candidate comes due, the purger (`agents/expiry.py`) reads the journal through the
  reading flow, as of a fence the agent has reached (the fold: its last accepted Append and that
  record's time + expireAfter), and purges only if that true deadline passed; else the entry
  goes to the true deadline or goes (`settle`). A candidate or Purge the agent handles while the
  read is under way makes its answer stale: nothing is settled, a later tick reads again.
The cost is one read per due journal. A journal deleted up to its last seqNr whose last Append's
events the store no longer holds has no deadline that can be read: it is dropped, not purged.

Where deadlines live, chosen for being the simplest that survives restarts and rebalances and
stays bounded:
- a changelog-backed Faust table `journal-expiry` (journal id bytes -> candidate deadline in
  epoch milliseconds, ASCII), holding only journals with a candidate: written by the agent as
  it handles an Append with an earlier candidate or a Purge, so it moves with the partition like
  the other tables and Faust flushes it before it commits the records it came from. A table is
  written only while the agent handles a record of its partition, so what the purger settles is
  held in memory until then (at most the due journals), and written by the agent before its next
  record's effect; kill -9 loses at worst a settlement, and the earlier candidate it replaced is
  read again;
- the same entries by time (issue 43), a second changelog-backed table `journal-expiry-times`
  keyed by the deadline (8 bytes big-endian, clamped to 0 .. 2**56 - 1 ms: 2 million years)
  then the journal id, so that a partition's RocksDB database (every table partition is one:
  `tables.store`) holds them in deadline order, read from its first key on (an `IndexTable`
  is always on RocksDB: Faust's memory store, a dict in insertion order, has no key order; the
  tests' tables sort, tests/support/expiry.py). Written with the first, in the same places (an
  entry's old time key goes when its candidate moves or clears), so both move together with the
  records they came from. A partition's time entries are trusted once its mark (a key that sorts
  after them all) says they are all there: a partition without deadlines is marked with its
  first record, one whose deadlines were written before this table existed (an upgrade) is
  built (below);
- per owned partition, an in-memory `ExpiryWindow` of the soonest deadlines, at most `bound`
  of them (`KJ_EXPIRY_WINDOW`), loaded when the partition is first looked at after its
  assignment and again when the clock passes the window's horizon (more than `bound` expiring
  journals): from the time entries, read in order from the first and stopping after `bound` + 1
  of them (+ the journals settled and not written yet, skipped), whatever the number of
  expiring journals; from a scan of the partition's whole `journal-expiry` (the number of its
  expiring journals: ~25 s per 8M, on the event loop) only while its time entries are built.
  So finding what is due never scans all journals, and memory stays bounded.

The build (an upgrade: time entries missing): while the agent handles the partition's records,
at most one step every `BUILD_INTERVAL_S` writes the time entries of the next `build_step`
(`KJ_EXPIRY_BUILD_STEP`) journals of `journal-expiry` in id order (a changelog record each, at
most Faust's producer buffer at once); the step that finds none left writes the mark. Entries
the agent sets or clears meanwhile keep both tables in step as always, so where the build is
does not matter. Until the mark the window is loaded by the scan, as before; a partition that
gets no record is not built and keeps the scan. A rebalance starts the build again from the
first journal (what was written is kept: each write checks the entry first). A worker of a
version without the time table must not write a partition after its mark (its deadlines would
be left out of the time entries): upgrade by stopping the old workers (docs/operations.md).

A Cassandra table by time bucket would survive too, but it would be written by replication (a
schema change, and the Spark rebuild would have to write it alike) and lag behind it. Deadlines
written from replication's fold results were weighed too: replication runs in a background
task, where no Faust table can be written, and lags the agent.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import faust

from journal import EventRecord
from journal.codec import events_of, parse_duration
from journal.core import ActionRecord, AppendHeader, MarkHeader, PurgeHeader, deadline_of_mark
from journal.metrics import METRICS
from kjconfig.access import KafkaAccess
from tables.limits import (
    DEFAULT_EXPIRY_BUILD_STEP,
    DEFAULT_EXPIRY_WINDOW,
    DEFAULT_RESTORE_AHEAD_MIN,
)
from tables.pruning import PartitionEntries
from tables.store import RocksMemory, SharedChangelogEnds, add_index_table, partition_entries

log = logging.getLogger(__name__)

EXPIRY_TABLE = "journal-expiry"
EXPIRY_TIMES_TABLE = "journal-expiry-times"  # the same entries, keyed by deadline then id
BUILD_INTERVAL_S = 0.01  # a build step at most this often per partition: the agent's time
FOREVER = 2**63 - 1  # a horizon past every deadline: the window holds them all

_TIME_LIMIT = 2**56 - 1  # a time key's deadline: its first byte 0, below the mark and Faust's
TIMED = b"\xff" + b"expiry times complete"  # the mark: sorts after every time key
_PRESENT = b"1"  # a time entry's value (the key says it all; an empty one is not a record)


def time_key(key: bytes, at: int) -> bytes:
    """Journal `key`'s key by time: byte order is (deadline, key) order."""
    return min(max(at, 0), _TIME_LIMIT).to_bytes(8, "big") + key


def of_time_key(raw: bytes) -> tuple[bytes, int]:
    """The journal key and deadline of a time key."""
    return raw[8:], int.from_bytes(raw[:8], "big")


class ExpiryWindow:
    """One partition's soonest deadlines, at most `bound`: every journal whose deadline is at
    or before `horizon` is held (with some later ones perhaps), none above `bound`."""

    def __init__(self, bound: int, entries: Iterable[tuple[bytes, int]]) -> None:
        self._bound = bound
        soonest = heapq.nsmallest(bound + 1, ((at, key) for key, at in entries))
        self.horizon = FOREVER
        if len(soonest) > bound:  # all below the first one left out are held
            self.horizon = soonest.pop()[0] - 1
        self._sorted = soonest  # (deadline, key), ascending
        self._at = {key: at for at, key in soonest}
        self._purging: set[bytes] = set()  # held, their Purge produced, not handled yet

    def __len__(self) -> int:
        return len(self._sorted)

    def deadline(self, key: bytes) -> int | None:
        """`key`'s deadline if held here."""
        return self._at.get(key)

    def holds_all(self) -> bool:
        """Whether every expiring journal of the partition is here."""
        return self.horizon == FOREVER

    def set(self, key: bytes, at: int) -> None:
        self.clear(key)
        if at > self.horizon:
            return  # not held: the table has it, a load past the horizon finds it
        bisect.insort(self._sorted, (at, key))
        self._at[key] = at
        if len(self._sorted) > self._bound:
            last_at, last_key = self._sorted.pop()
            del self._at[last_key]
            self._purging.discard(last_key)
            self.horizon = min(self.horizon, last_at - 1)

    def clear(self, key: bytes) -> None:
        at = self._at.pop(key, None)
        if at is not None:
            del self._sorted[bisect.bisect_left(self._sorted, (at, key))]
            self._purging.discard(key)

    def purging(self, key: bytes) -> None:
        """A Purge of `key` was produced: not due again, but held until the agent handles a
        Purge or an Append of it (its table entry goes then)."""
        if key in self._at:
            self._purging.add(key)

    def due(self, now_ms: int) -> list[bytes]:
        """The held journals whose deadline is at or before `now_ms`, soonest first, but for
        those being purged."""
        due = self._sorted[: self._count_due(now_ms)]
        return [key for _, key in due if key not in self._purging]

    def _count_due(self, now_ms: int) -> int:
        return bisect.bisect_left(self._sorted, (now_ms + 1, b""))


class ExpiryTable(Protocol):
    """The candidate deadlines (epoch ms) by journal id, and the same entries by time. Writes
    go to the partition of Faust's current event; reads name theirs."""

    def get(self, key: bytes) -> int | None: ...

    def set(self, key: bytes, at: int) -> None:
        """`key`'s deadline, by id and by time (its old time entry goes)."""

    def delete(self, key: bytes) -> None:
        """`key` has no deadline: both its entries go (none: nothing)."""

    def entries(self, partition: int, after: bytes | None = None) -> Iterator[tuple[bytes, int]]:
        """The partition's entries by id, in key order, from the first above `after`."""

    def soonest(self, partition: int) -> Iterator[tuple[bytes, int]]:
        """The partition's time entries, soonest first (read as iterated)."""

    def timed(self, partition: int) -> bool:
        """Whether the partition's time entries are all there (its mark)."""

    def time(self, key: bytes, at: int) -> None:
        """The time entry of `key`'s entry (the build), unless it is there."""

    def mark_timed(self) -> None:
        """The time entries of the current event's partition are all there."""


class ExpiryIndex:
    """The candidate deadlines of the owned partitions' journals: the agent `record`s every
    action, the purger asks what is `due`, confirms it and `settle`s it (see the module)."""

    def __init__(
        self,
        table: ExpiryTable,
        bound: int = DEFAULT_EXPIRY_WINDOW,
        build_step: int = DEFAULT_EXPIRY_BUILD_STEP,
        build_interval_s: float = BUILD_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._table = table
        self._bound = bound
        self._build_step = build_step
        self._build_interval_s = build_interval_s
        self._clock = clock
        self._windows: dict[int, ExpiryWindow] = {}
        # per partition, journals being confirmed: a candidate or Purge handled since drops one
        self._checking: dict[int, set[bytes]] = {}
        # per partition, settled deadlines (None: none) the agent writes to the table next
        self._settled: dict[int, dict[bytes, int | None]] = {}
        # per partition looked at since its assignment: whether its time entries are all there
        self._timed: dict[int, bool] = {}
        self._unmarked: set[int] = set()  # all there (none to build), the mark not written yet
        # per partition being built: the last journal key done (None: none yet), its last step
        self._building: dict[int, bytes | None] = {}
        self._stepped: dict[int, float] = {}

    def record(self, action: ActionRecord) -> None:
        """Apply `action` to its journal's candidate deadline. Call only while the agent
        iterates its stream, with the action's event as Faust's current event (a table write
        needs it)."""
        self._write_settled(action.partition)
        self._by_time(action.partition)  # looked at before this record's writes
        self._build(action.partition)
        header = action.header
        if isinstance(header, AppendHeader):
            at = deadline_of(action)
            if at is None:
                return  # it may be rejected: it clears nothing (the purger reads the fold)
        elif isinstance(header, MarkHeader):
            # a candidate carried from before a move (agents/carry.py); other Marks leave it
            at = deadline_of_mark(header.id)
            if at is None:
                return
        elif not isinstance(header, PurgeHeader):
            return  # Deletes leave the deadline as it is
        else:
            at = None
        key = action.key.id.encode("utf-8")
        self._checking.get(action.partition, set()).discard(key)  # what is read is stale
        window = self._windows.get(action.partition)
        if at is not None:
            held = self._table.get(key)
            if held is None or at < held:  # the earliest candidate: never past the true one
                self._table.set(key, at)
                if window is not None:
                    window.set(key, at)
            return
        self._table.delete(key)
        if window is not None:
            window.clear(key)

    def _write_settled(self, partition: int) -> None:
        settled = self._settled.pop(partition, None)
        for key, at in (settled or {}).items():
            if at is not None:
                self._table.set(key, at)
            else:
                self._table.delete(key)

    def _build(self, partition: int) -> None:
        """A step of the partition's time entries, if they are being built (see the module)."""
        if partition in self._unmarked:
            self._unmarked.discard(partition)
            self._table.mark_timed()
            return
        if partition not in self._building:
            return
        now = self._clock()
        if now - self._stepped.get(partition, float("-inf")) < self._build_interval_s:
            return
        self._stepped[partition] = now
        after = self._building[partition]
        for done, (key, at) in enumerate(self._table.entries(partition, after), start=1):
            self._table.time(key, at)
            if done == self._build_step:
                self._building[partition] = key
                return
        self._table.mark_timed()
        del self._building[partition]
        self._timed[partition] = True
        log.info("the expiry deadlines of partition %d are indexed by time", partition)

    def _by_time(self, partition: int) -> bool:
        """Whether the partition's window is loaded from its time entries. The first time it
        is looked at since its assignment (its first record or load), they are there (the
        mark), or none are needed (no deadline: the mark is written with the next record), or
        they are to be built."""
        timed = self._timed.get(partition)
        if timed is None:
            timed = self._table.timed(partition)
            if not timed and next(self._table.entries(partition), None) is None:
                timed = True  # no deadline: every time entry is there
                self._unmarked.add(partition)
            elif not timed:
                self._building[partition] = None
                log.info(
                    "the expiry deadlines of partition %d are not indexed by time (written "
                    "before the index existed): building it while the agent handles the "
                    "partition's records, its expiry window loaded by a scan meanwhile",
                    partition,
                )
            self._timed[partition] = timed
        return timed

    def due(self, partition: int, now_ms: int) -> list[str]:
        """The journal ids of `partition` whose candidate deadline passed; the window is loaded
        from the table first if it is not there or `now_ms` is past its horizon. Call only once
        the partition's table is recovered (not during a rebalance)."""
        window = self._windows.get(partition)
        if window is None or now_ms > window.horizon:
            window = self._windows[partition] = self._load(partition)
        return [key.decode("utf-8") for key in window.due(now_ms)]

    def _load(self, partition: int) -> ExpiryWindow:
        settled = self._settled.get(partition, {})  # not in the table yet: taken first
        stored: Iterator[tuple[bytes, int]]
        if self._by_time(partition):
            source = "index"
            # the first `bound` + 1 others: every later one is past the window's horizon
            stored = itertools.islice(
                ((key, at) for key, at in self._table.soonest(partition) if key not in settled),
                self._bound + 1,
            )
        else:
            source = "scan"
            stored = ((key, at) for key, at in self._table.entries(partition) if key not in settled)
        METRICS.counter("kafka_journal_expiry_window_loads_total", source=source).inc()
        entries = itertools.chain(stored, ((k, at) for k, at in settled.items() if at is not None))
        return ExpiryWindow(self._bound, entries)

    def checking(self, partition: int, journal_ids: Iterable[str]) -> None:
        """The purger is about to confirm these journals' deadlines: call before it takes the
        fence its reads are as of, so that whatever the agent handles after is seen."""
        self._checking.setdefault(partition, set()).update(j.encode("utf-8") for j in journal_ids)

    def confirmed(self, partition: int, journal_id: str) -> bool:
        """Whether nothing the agent handled since `checking` made the read stale."""
        return journal_id.encode("utf-8") in self._checking.get(partition, set())

    def settle(self, partition: int, journal_id: str, at: int | None) -> None:
        """The journal's true deadline as read (None: none), unless the read is stale: the
        window takes it now, the table when the agent handles the partition's next record."""
        key = journal_id.encode("utf-8")
        checking = self._checking.get(partition, set())
        if key not in checking:
            return
        checking.discard(key)
        self._settled.setdefault(partition, {})[key] = at
        window = self._windows.get(partition)
        if window is not None:
            if at is None:
                window.clear(key)
            else:
                window.set(key, at)

    def done(self, partition: int) -> None:
        """The purger's tick of the partition ended: nothing is being confirmed there."""
        self._checking.pop(partition, None)

    def purged(self, partition: int, journal_id: str) -> None:
        """A Purge of the journal was produced: not due again here; the agent clears its
        deadline when it handles the Purge."""
        window = self._windows.get(partition)
        if window is not None:
            window.purging(journal_id.encode("utf-8"))

    def forget(self, partition: int) -> None:
        """The partition went; when it comes back its window is loaded again (what was settled
        and not written is read again), and whether its time entries are there looked at
        again."""
        for held in (self._windows, self._checking, self._settled, self._timed):
            held.pop(partition, None)
        self._building.pop(partition, None)
        self._stepped.pop(partition, None)
        self._unmarked.discard(partition)


def deadline_of(append: ActionRecord) -> int | None:
    """When an Append's journal expires (epoch ms) if the fold accepts it, None if the Append
    has no expireAfter."""
    events = events_of(append)  # decoded once by the agent's parse already
    return None if not events else deadline_of_event(events[-1])


def deadline_of_event(last: EventRecord) -> int | None:
    """The deadline an Append's last event sets: its record's time plus its expireAfter."""
    expire_after = last.metadata.expire_after
    if expire_after is None:
        return None
    written_ms = round(last.timestamp.timestamp() * 1000)
    return written_ms + parse_duration(expire_after).nanos // 1_000_000


class FaustExpiryTable:
    """`ExpiryTable` on two Faust tables of the RocksDB store (`tables.store.IndexTable`): a
    partition's entries are read in key order from its own database (`entries`, which for
    the time table is deadline order)."""

    def __init__(
        self, by_id: Any, by_time: Any, entries: PartitionEntries = partition_entries
    ) -> None:
        # faust.Table[bytes, bytes] each; faust's generics do not type-check
        self._by_id = by_id
        self._by_time = by_time
        self._entries = entries

    def get(self, key: bytes) -> int | None:
        raw = self._by_id.get(key)
        return None if raw is None else int(raw)

    def set(self, key: bytes, at: int) -> None:
        held = self.get(key)
        if held == at:
            return
        if held is not None:
            self._untime(key, held)
        self._by_id[key] = str(at).encode("ascii")
        self._by_time[time_key(key, at)] = _PRESENT

    def delete(self, key: bytes) -> None:
        held = self.get(key)
        if held is None:
            return
        del self._by_id[key]
        self._untime(key, held)

    def _untime(self, key: bytes, at: int) -> None:
        old = time_key(key, at)
        if self._by_time.get(old) is not None:  # a partition being built may not have it
            del self._by_time[old]

    def entries(self, partition: int, after: bytes | None = None) -> Iterator[tuple[bytes, int]]:
        for key, raw in self._entries(self._by_id, partition, after):
            if key != after:
                yield key, int(raw)

    def soonest(self, partition: int) -> Iterator[tuple[bytes, int]]:
        for raw, _ in self._entries(self._by_time, partition, None):
            if raw[0] != 0:
                return  # the mark: every time key is below it
            yield of_time_key(raw)

    def timed(self, partition: int) -> bool:
        first = next(self._entries(self._by_time, partition, TIMED), None)
        return first is not None and first[0] == TIMED

    def time(self, key: bytes, at: int) -> None:
        timed = time_key(key, at)
        if self._by_time.get(timed) is None:
            self._by_time[timed] = _PRESENT

    def mark_timed(self) -> None:
        self._by_time[TIMED] = _PRESENT


def define_expiry_table(
    app: faust.App,
    partitions: int,
    kafka: KafkaAccess,
    memory: RocksMemory | None = None,
    restore_ahead_min: int = DEFAULT_RESTORE_AHEAD_MIN,
    *,
    window: int = DEFAULT_EXPIRY_WINDOW,
    build_step: int = DEFAULT_EXPIRY_BUILD_STEP,
    ends: SharedChangelogEnds | None = None,
) -> ExpiryIndex:
    """The two tables (a partition's local state its changelog no longer holds is dropped, and
    a long restore read ahead of Faust's, as the other tables'; their RocksDB on the worker's
    `memory`) and the index over them."""

    def table(name: str, help: str) -> Any:
        return add_index_table(app, kafka, partitions, name, help, memory, restore_ahead_min, ends)

    by_id = table(EXPIRY_TABLE, "per expiring journal: when it expires (epoch ms)")
    by_time = table(EXPIRY_TIMES_TABLE, "per expiring journal: its deadline and id, in order")
    return ExpiryIndex(FaustExpiryTable(by_id, by_time), window, build_step)
