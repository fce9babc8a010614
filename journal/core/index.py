"""Where a journal's unreplicated actions are: the index a read asks before it touches Kafka.

An index answers for one journal of one partition, up to a fence (an offset every action the
read must see lies below): `Indexed` lists offset runs that hold all of the journal's actions
above `needs`, or `NotIndexed` says why it cannot tell (not caught up, past its memory bound,
not the owner). The reading flow decides what to do then (a scan of the partition).

`needs` is the store pointer the reader's view of the store must have reached: the index has
dropped what replication covered up to there. `covered(partition)` is a pointer the index knows
the store reached, with no I/O, so a reader can tell whether the store state it read before
asking the index is new enough.

Two indexes implement it: a worker's changelog-backed tables (`tables/`), and the direct
client's `TailIndex` (`journal/kafka/tail.py`). Both keep, per journal, `OffsetRuns`: bounded, so
memory does not grow with how long replication has been offline. Runs the store holds are kept
(the tables always, the tail index within its memory bound): with the store down, a read of a
journal with replicated history then fetches its own records instead of scanning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from journal.core.model import JournalKey

MAX_RUNS = 32  # per journal; past it the closest runs merge (and span others' records)
# ... down to this many at once, so a journal whose records interleave with others' merges
# once per MERGED_RUNS new runs, not on every record (that merge was ~3.5 us of each record)
MERGED_RUNS = MAX_RUNS // 2


@dataclass(frozen=True, slots=True)
class OffsetRun:
    """Offsets `first..last` of a partition holding `count` of one journal's records."""

    first: int
    last: int
    count: int

    @property
    def exact(self) -> bool:
        """Whether every offset of the run is the journal's (nothing else is read)."""
        return self.count == self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class OffsetRuns:
    """One journal's record offsets in one partition, ascending, in at most `MAX_RUNS` runs
    (past it, the closest merge down to `MERGED_RUNS`).

    `pruned_to`: runs up to this store pointer were dropped as replicated (-1: none was), so
    a reader's view of the store must reach it.
    """

    runs: tuple[OffsetRun, ...] = ()
    pruned_to: int = -1

    def add(self, offset: int, replicated: int = -1) -> OffsetRuns:
        """With the record at `offset`; `replicated`: a store pointer, below which runs merge
        first when they must (`_merge_closest`)."""
        runs = self.runs
        if runs and offset <= runs[-1].last:
            return self  # seen already: a replayed record
        if runs and offset == runs[-1].last + 1:
            last = runs[-1]
            grown = OffsetRun(last.first, offset, last.count + 1)
            return OffsetRuns((*runs[:-1], grown), self.pruned_to)
        added = (*runs, OffsetRun(offset, offset, 1))
        return OffsetRuns(_bounded(added, replicated), self.pruned_to)

    def after(self, pointer: int) -> OffsetRuns:
        """Without the runs wholly at or below `pointer`, a replicated store pointer.

        `pruned_to` becomes the last offset dropped, not `pointer`: the journal has no record
        between the two (it would be in a run), so a reader's store needs only that far. A
        conditional append's verdict then trusts the state its last verdict left while other
        journals' records move the pointer on (journal/client/conditional.py)."""
        if not self.runs or self.runs[0].last > pointer:
            return self
        kept = tuple(r for r in self.runs if r.last > pointer)
        dropped_to = self.runs[len(self.runs) - len(kept) - 1].last
        return OffsetRuns(kept, max(self.pruned_to, dropped_to))

    def bounded(self, replicated: int = -1) -> OffsetRuns:
        """At most `MAX_RUNS` runs (merged down to `MERGED_RUNS` past it, as in `add`)."""
        return OffsetRuns(_bounded(self.runs, replicated), self.pruned_to)

    def encode(self) -> list[int]:
        return [self.pruned_to, *(n for r in self.runs for n in (r.first, r.last, r.count))]

    @classmethod
    def decode(cls, flat: list[int]) -> OffsetRuns:
        if len(flat) % 3 != 1:
            raise ValueError(f"not encoded offset runs: {len(flat)} numbers")
        it = iter(flat)
        pruned_to = next(it)
        # map, not a generator: a verdict decodes up to MAX_RUNS runs, twice per append
        return cls(tuple(map(OffsetRun, it, it, it)), pruned_to)


class GrowingRuns:
    """One journal's `OffsetRuns` as a tail grows them record by record (journal/kafka/tail.py):
    the same runs and the same merging, kept as one mutable list of numbers (the layout of
    `OffsetRuns.encode`), so that indexing a record allocates nothing; `frozen()` is what a
    reader is given. The last one given is kept with how many of its runs are still true
    (`_kept`): the next is made from those and the runs after them (a conditional append's
    look and verdict ask for it twice per record of the journal, which has up to MAX_RUNS)."""

    __slots__ = ("_flat", "_frozen", "_kept")

    def __init__(self, flat: list[int]) -> None:
        self._flat = flat
        self._frozen = OffsetRuns((), flat[0])  # none of its runs yet
        self._kept = 0

    @classmethod
    def empty(cls, pruned_to: int) -> GrowingRuns:
        return cls([pruned_to])

    def add(self, offset: int, replicated: int = -1) -> None:
        flat = self._flat
        if len(flat) > 1:
            last = flat[-2]
            if offset <= last:
                return  # seen already: a replayed record
            if offset == last + 1:
                flat[-2] = offset
                flat[-1] += 1
                self._kept = min(self._kept, len(flat) // 3 - 1)  # the last run changed
                return
        flat += (offset, offset, 1)
        if len(flat) > 1 + 3 * MAX_RUNS:
            self._flat = self.frozen().bounded(replicated).encode()
            self._kept = 0

    def frozen(self) -> OffsetRuns:
        flat, frozen, kept = self._flat, self._frozen, self._kept
        count = len(flat) // 3
        if kept == count == len(frozen.runs):
            return frozen
        numbers = iter(flat[1 + 3 * kept :])
        runs = (*frozen.runs[:kept], *map(OffsetRun, numbers, numbers, numbers))
        self._frozen, self._kept = OffsetRuns(runs, flat[0]), count
        return self._frozen

    @property
    def last(self) -> int:
        """The last offset held (-1: none)."""
        flat = self._flat
        return flat[-2] if len(flat) > 1 else -1

    def after(self, pointer: int) -> GrowingRuns | None:
        """`OffsetRuns.after`; None when no run is left."""
        flat = self._flat
        if len(flat) > 1 and flat[2] > pointer:
            return self  # the oldest run reaches past the pointer: nothing to drop
        left = self.frozen().after(pointer)
        return GrowingRuns(left.encode()) if left.runs else None


def _bounded(runs: tuple[OffsetRun, ...], replicated: int) -> tuple[OffsetRun, ...]:
    return runs if len(runs) <= MAX_RUNS else _merge_closest(runs, MERGED_RUNS, replicated)


def _merge_closest(
    runs: tuple[OffsetRun, ...], keep: int, replicated: int
) -> tuple[OffsetRun, ...]:
    """Merge across the smallest gaps between neighbouring runs until `keep` runs are left:
    bounded, and a read of the merged runs reads the fewest records of other journals. Gaps
    between runs at or below `replicated` go first: only a read without the store fetches
    those runs, while a run reaching above it is fetched by every read until replication
    passes it. (A gap and its side of the pointer do not change when runs beside it merge,
    so merging the k first at once is merging the first pair k times.) The newest run stays
    apart: a conditional append's verdict counts the journal's records between its last
    verdict and its own record (journal/client/conditional.py), which a run spanning both
    would hide."""
    gaps = sorted(
        range(len(runs) - 2),
        key=lambda i: (runs[i + 1].last > replicated, runs[i + 1].first - runs[i].last),
    )
    across = set(gaps[: len(runs) - keep])  # merge run i with run i + 1
    merged: list[OffsetRun] = []
    for i, run in enumerate(runs):
        if i - 1 in across:
            left = merged[-1]
            merged[-1] = OffsetRun(left.first, run.last, left.count + run.count)
        else:
            merged.append(run)
    return tuple(merged)


@dataclass(frozen=True, slots=True)
class Indexed:
    """The journal's records above `needs` (and below the fence) all lie in `runs`.

    `complete`: nothing was ever dropped and the index saw the partition from offset 0, so
    the runs hold the whole journal (what a read needs when the store cannot answer).
    """

    runs: tuple[OffsetRun, ...]
    needs: int
    complete: bool = False


# `NotIndexed.reason` of an index whose reader only has to wait for it to get there (a
# worker's agent is behind the fence and publishing): with the store down, a worker's read
# answers StoreUnavailable at once instead of scanning (journal/client/reading.py)
BEHIND = "behind"


@dataclass(frozen=True, slots=True)
class NotIndexed:
    """The index cannot tell; `reason` is a metric label."""

    reason: str


IndexAnswer = Indexed | NotIndexed


class RecordIndex(Protocol):
    """Where one journal's unreplicated records are in its partition (see the module)."""

    def covered(self, partition: int) -> int:
        """A store pointer of `partition` known to be reached (-1: none), without I/O."""
        ...

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        """Where `key`'s records below `fence` are; waits (bounded) for the index to get there."""
        ...

    async def close(self) -> None: ...
