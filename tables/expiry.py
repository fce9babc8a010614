"""When journals expire: an Append's `expireAfter` makes its journal expire that long after the
Append's record was written, and the owner of its partition purges it then (`agents/expiry.py`).

The rule is kafka-journal's replicator's: the last Append of a journal decides (its events'
`expireAfter`, read from the record's payload metadata); an Append without one clears it; a
Purge clears it. A journal appended again before its deadline lives on, with a later one. The
rule follows every Append record in log order, a rejected rival's (conflict rule) included: the
log says nothing else about a deadline, and rivals are rare.

Where deadlines live, chosen for being the simplest that survives restarts and rebalances and
stays bounded:
- a changelog-backed Faust table `journal-expiry` (journal id bytes -> expire-at in epoch
  milliseconds, ASCII), holding only journals that expire: written by the agent as it handles
  the Append or Purge (one changelog record per Append that sets or clears a deadline), so it
  moves with the partition like the other tables and Faust flushes it before it commits the
  records it came from;
- per owned partition, an in-memory `ExpiryWindow` of the soonest deadlines, at most `bound`
  of them, loaded from the table's partition (a scan of that partition's expiring journals,
  none else) when the partition is first looked at after its assignment, and loaded again
  when the clock passes the window's horizon (more than `bound` expiring journals). So finding
  what is due never scans all journals, and memory stays bounded whatever their number.
A Cassandra table by time bucket would survive too, but it would be written by replication (a
schema change, and the Spark rebuild would have to write it alike) and lag behind it.
"""

from __future__ import annotations

import bisect
import functools
import heapq
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import faust

from journal.codec.actions import events_of
from journal.codec.duration import parse_duration
from journal.core.model import ActionRecord, AppendHeader, PurgeHeader
from journal.kafka.topic import end_offsets
from kjconfig.access import KafkaAccess
from tables.store import IndexTable, partition_items

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
    """The deadlines of the owned partitions' journals: the agent `record`s every action, the
    purger asks what is `due` (see the module)."""

    def __init__(self, table: ExpiryTable, bound: int = WINDOW_BOUND) -> None:
        self._table = table
        self._bound = bound
        self._windows: dict[int, ExpiryWindow] = {}

    def record(self, action: ActionRecord) -> None:
        """Apply `action` to its journal's deadline. Call only while the agent iterates its
        stream, with the action's event as Faust's current event (a table write needs it)."""
        header = action.header
        if isinstance(header, AppendHeader):
            at = deadline_of(action)
        elif isinstance(header, PurgeHeader):
            at = None
        else:
            return  # Deletes and Marks leave the deadline as it is
        key = action.key.id.encode("utf-8")
        window = self._windows.get(action.partition)
        if at is not None:
            self._table.set(key, at)
            if window is not None:
                window.set(key, at)
            return
        if window is not None and window.deadline(key) is None and window.holds_all():
            return  # no deadline to clear (the common Append): no table read
        if self._table.get(key) is not None:
            self._table.delete(key)
        if window is not None:
            window.clear(key)

    def due(self, partition: int, now_ms: int) -> list[str]:
        """The journal ids of `partition` whose deadline passed; the window is loaded from the
        table first if it is not there or `now_ms` is past its horizon. Call only once the
        partition's table is recovered (not during a rebalance)."""
        window = self._windows.get(partition)
        if window is None or now_ms > window.horizon:
            window = ExpiryWindow(self._bound, self._table.entries(partition))
            self._windows[partition] = window
        return [key.decode("utf-8") for key in window.due(now_ms)]

    def purged(self, partition: int, journal_id: str) -> None:
        """A Purge of the journal was produced: not due again here; the agent clears its
        deadline when it handles the Purge."""
        window = self._windows.get(partition)
        if window is not None:
            window.purging(journal_id.encode("utf-8"))

    def forget(self, partition: int) -> None:
        """The partition went; when it comes back its window is loaded again."""
        self._windows.pop(partition, None)


def deadline_of(append: ActionRecord) -> int | None:
    """When an Append's journal expires (epoch ms), None if the Append has no expireAfter."""
    events = events_of(append)  # decoded once by the agent's parse already
    expire_after = None if not events else events[-1].metadata.expire_after
    if expire_after is None:
        return None
    written_ms = round(append.timestamp.timestamp() * 1000)
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


def define_expiry_table(app: faust.App, partitions: int, kafka: KafkaAccess) -> ExpiryIndex:
    """The table (a partition's local state its changelog no longer holds is dropped, as the
    other tables') and the index over it."""
    table = app.tables.add(
        IndexTable(
            app,
            changelog_ends=functools.partial(end_offsets, kafka),
            name=EXPIRY_TABLE,
            beacon=app.tables.beacon,
            key_type=bytes,
            value_type=bytes,
            partitions=partitions,
            help="per expiring journal: when it expires (epoch ms)",
        )
    )
    return ExpiryIndex(FaustExpiryTable(table))
