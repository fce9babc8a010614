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
- per owned partition, an in-memory `ExpiryWindow` of the soonest deadlines, at most `bound`
  of them, loaded from the table's partition (a scan of that partition's expiring journals,
  none else) when the partition is first looked at after its assignment, and loaded again
  when the clock passes the window's horizon (more than `bound` expiring journals). So finding
  what is due never scans all journals, and memory stays bounded whatever their number.
A Cassandra table by time bucket would survive too, but it would be written by replication (a
schema change, and the Spark rebuild would have to write it alike) and lag behind it. Deadlines
written from replication's fold results were weighed too: replication runs in a background
task, where no Faust table can be written, and lags the agent.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import faust

from journal import EventRecord
from journal.codec import events_of, parse_duration
from journal.core import ActionRecord, AppendHeader, PurgeHeader
from journal.kafka import end_offsets
from kjconfig.access import KafkaAccess
from tables.store import (
    DEFAULT_RESTORE_AHEAD_MIN,
    ChangelogRestore,
    IndexTable,
    RocksMemory,
    partition_items,
)

EXPIRY_TABLE = "journal-expiry"
WINDOW_BOUND = 10_000  # deadlines held in memory per owned partition
FOREVER = 2**63 - 1  # a horizon past every deadline: the window holds them all


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
    """The table of deadlines (epoch ms) by journal id, and one partition's entries."""

    def get(self, key: bytes) -> int | None: ...

    def set(self, key: bytes, at: int) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def entries(self, partition: int) -> Iterator[tuple[bytes, int]]: ...


class ExpiryIndex:
    """The candidate deadlines of the owned partitions' journals: the agent `record`s every
    action, the purger asks what is `due`, confirms it and `settle`s it (see the module)."""

    def __init__(self, table: ExpiryTable, bound: int = WINDOW_BOUND) -> None:
        self._table = table
        self._bound = bound
        self._windows: dict[int, ExpiryWindow] = {}
        # per partition, journals being confirmed: a candidate or Purge handled since drops one
        self._checking: dict[int, set[bytes]] = {}
        # per partition, settled deadlines (None: none) the agent writes to the table next
        self._settled: dict[int, dict[bytes, int | None]] = {}

    def record(self, action: ActionRecord) -> None:
        """Apply `action` to its journal's candidate deadline. Call only while the agent
        iterates its stream, with the action's event as Faust's current event (a table write
        needs it)."""
        self._write_settled(action.partition)
        header = action.header
        if isinstance(header, AppendHeader):
            at = deadline_of(action)
            if at is None:
                return  # it may be rejected: it clears nothing (the purger reads the fold)
        elif not isinstance(header, PurgeHeader):
            return  # Deletes and Marks leave the deadline as it is
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
        if self._table.get(key) is not None:
            self._table.delete(key)
        if window is not None:
            window.clear(key)

    def _write_settled(self, partition: int) -> None:
        settled = self._settled.pop(partition, None)
        for key, at in (settled or {}).items():
            if at is not None:
                self._table.set(key, at)
            elif self._table.get(key) is not None:
                self._table.delete(key)

    def due(self, partition: int, now_ms: int) -> list[str]:
        """The journal ids of `partition` whose candidate deadline passed; the window is loaded
        from the table first if it is not there or `now_ms` is past its horizon. Call only once
        the partition's table is recovered (not during a rebalance)."""
        window = self._windows.get(partition)
        if window is None or now_ms > window.horizon:
            settled = self._settled.get(partition, {})  # not in the table yet: taken first
            entries = itertools.chain(
                ((key, at) for key, at in self._table.entries(partition) if key not in settled),
                ((key, at) for key, at in settled.items() if at is not None),
            )
            window = self._windows[partition] = ExpiryWindow(self._bound, entries)
        return [key.decode("utf-8") for key in window.due(now_ms)]

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
        and not written is read again)."""
        self._windows.pop(partition, None)
        self._checking.pop(partition, None)
        self._settled.pop(partition, None)


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
    """`ExpiryTable` on a Faust table of the RocksDB store (`tables.store.IndexTable`)."""

    def __init__(self, table: Any) -> None:
        self._table = table  # faust.Table[bytes, bytes]; faust's generics do not type-check

    def get(self, key: bytes) -> int | None:
        raw = self._table.get(key)
        return None if raw is None else int(raw)

    def set(self, key: bytes, at: int) -> None:
        self._table[key] = str(at).encode("ascii")

    def delete(self, key: bytes) -> None:
        del self._table[key]

    def entries(self, partition: int) -> Iterator[tuple[bytes, int]]:
        for key, raw in partition_items(self._table.data, partition):
            yield key, int(raw)


def define_expiry_table(
    app: faust.App,
    partitions: int,
    kafka: KafkaAccess,
    memory: RocksMemory | None = None,
    restore_ahead_min: int = DEFAULT_RESTORE_AHEAD_MIN,
) -> ExpiryIndex:
    """The table (a partition's local state its changelog no longer holds is dropped, and a
    long restore read ahead of Faust's, as the other tables'; its RocksDB on the worker's
    `memory`) and the index over it."""
    table = app.tables.add(
        IndexTable(
            app,
            changelog_ends=functools.partial(end_offsets, kafka),
            restore=ChangelogRestore(kafka, restore_ahead_min),
            memory=memory,
            name=EXPIRY_TABLE,
            beacon=app.tables.beacon,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            help="per expiring journal: when it expires (epoch ms)",
        )
    )
    return ExpiryIndex(FaustExpiryTable(table))
