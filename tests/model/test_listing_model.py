"""The listing's grow (docs/operations.md, "Growing the listing") checked as a model: every
interleaving of small scopes, searched exhaustively with memoised states.

Actors take one atomic step at a time: replication (each action of the log, in order: take a
view of the record, then write the id into each generation of the view, one write a step), a
reader (take a view, then read the generation it names), and the command (the project's
`next_listing_step` on the record: plan, copy a bucket as a read and then one write per id,
record the bucket, switch, stop, drop), killed -9 once at any step (it forgets all but the
record). The lease is modelled by what it guarantees: a step that waits for the phase
(`ListingStep.wait`) is enabled only when no actor holds a view of an earlier record. Cells
are Cassandra's: the higher stamp wins, a delete wins a tie, and the command deletes the old
generation's partitions at "now" (above every stamp).

Checked: every read returns, per id, the listing before or after replication's action in
flight on it (never a purged id, never a missing live one), and at every end the record is
the target alone, whose rows are exactly the live ids, and the old generation holds none.
The broken variants below must be caught: the model can fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from journal.core.listing import Listing, ListingPhase, listing_bucket, next_listing_step

OLD, NEW = 32, 64
NOW = 10**9  # the drop's stamp: the client's clock, far above any offset + 1


@dataclass(frozen=True)
class Scope:
    initial: tuple[str, ...]  # listed before the grow, stamped 1
    actions: tuple[tuple[str, bool], ...]  # replication's, in log order: (id, listed after)
    reads: int = 2


@dataclass(frozen=True)
class Variant:
    wait: bool = True  # the command waits out the views of the phase before
    copy_stamp: int | None = 0  # None: the copy stamps with "now"


Cells = frozenset[tuple[int, str, int, bool]]  # (bucket number, id, stamp, present)


@dataclass(frozen=True)
class State:
    record: Listing
    version: int  # of the record: +1 at each phase
    cells: Cells
    applied: int  # replication's actions done
    writing: tuple[int, tuple[int, ...]] | None  # (view version, generations left to write)
    reads_left: int
    reader_view: tuple[int, int] | None  # (view version, generation it reads)
    copying: tuple[int, tuple[str, ...]] | None  # (bucket, ids read and not yet written)
    waited: int  # the record version the command waited out in this run (-1: none)
    crashes: int


class Violation(AssertionError):
    pass


def _write(cells: Cells, bucket: int, journal_id: str, stamp: int, present: bool) -> Cells:
    old = [c for c in cells if c[0] == bucket and c[1] == journal_id]
    if old:
        _, _, stamp0, present0 = old[0]
        if stamp < stamp0 or (stamp == stamp0 and (present or not present0)):
            return cells
    return frozenset([c for c in cells if c not in old] + [(bucket, journal_id, stamp, present)])


def _listed(cells: Cells, buckets: int) -> frozenset[str]:
    return frozenset(j for (b, j, _, p) in cells if p and b == listing_bucket(j, buckets))


def _truth(scope: Scope, applied: int) -> dict[str, bool]:
    live = {j: True for j in scope.initial}
    for journal_id, present in scope.actions[:applied]:
        live[journal_id] = present
    return live


def _views_stale(state: State) -> bool:
    views = [v for v in (state.writing, state.reader_view) if v is not None]
    return any(v[0] < state.version for v in views)


def _steps(scope: Scope, variant: Variant, s: State) -> Iterator[tuple[str, State]]:
    # replication
    if s.applied < len(scope.actions):
        journal_id, present = scope.actions[s.applied]
        stamp = s.applied + 2
        if s.writing is None:
            yield "repl view", replace(s, writing=(s.version, s.record.written))
        elif s.writing[1]:
            gen, rest = s.writing[1][0], s.writing[1][1:]
            cells = _write(s.cells, listing_bucket(journal_id, gen), journal_id, stamp, present)
            yield (
                f"repl write {journal_id} in {gen}",
                replace(s, cells=cells, writing=(s.writing[0], rest)),
            )
        else:
            yield "repl done", replace(s, writing=None, applied=s.applied + 1)
    # the reader
    if s.reads_left:
        if s.reader_view is None:
            yield "read view", replace(s, reader_view=(s.version, s.record.current))
        else:
            listed = _listed(s.cells, s.reader_view[1])
            before, after = _truth(scope, s.applied), _truth(scope, s.applied + 1)
            for journal_id in set(before) | set(after) | set(listed):
                allowed = {before.get(journal_id, False)}
                in_flight = s.writing is not None and s.applied < len(scope.actions)
                if in_flight and scope.actions[s.applied][0] == journal_id:
                    allowed.add(after.get(journal_id, False))
                if (journal_id in listed) not in allowed:
                    raise Violation(
                        f"read of {s.reader_view[1]} buckets: {journal_id} listed "
                        f"{journal_id in listed}, expected {allowed}"
                    )
            yield "read", replace(s, reader_view=None, reads_left=s.reads_left - 1)
    # the command
    if s.crashes and next_listing_step(s.record, NEW).action != "finished":
        yield "kill -9 command", replace(s, copying=None, waited=-1, crashes=s.crashes - 1)
    yield from _command(variant, s)


def _command(variant: Variant, s: State) -> Iterator[tuple[str, State]]:
    record = s.record
    step = next_listing_step(record, NEW)
    if step.action == "finished":
        return
    if step.wait and s.waited != s.version:
        if not variant.wait or not _views_stale(s):
            yield "wait", replace(s, waited=s.version)
        return
    if step.action == "plan":
        planned = Listing(record.current, NEW, ListingPhase.GROWING)
        yield "plan", replace(s, record=planned, version=s.version + 1)
    elif step.action == "copy":
        assert step.bucket is not None
        if s.copying is None:
            source = step.bucket  # the 32-bucket generation's numbers are its buckets
            ids = tuple(sorted(j for (b, j, _, p) in s.cells if b == source and p))
            yield f"copy read {source}", replace(s, copying=(source, ids))
        elif s.copying[1]:
            journal_id, rest = s.copying[1][0], s.copying[1][1:]
            stamp = NOW if variant.copy_stamp is None else variant.copy_stamp
            cells = _write(s.cells, listing_bucket(journal_id, NEW), journal_id, stamp, True)
            yield f"copy {journal_id}", replace(s, cells=cells, copying=(s.copying[0], rest))
        else:
            copied = record.copied | {s.copying[0]}
            yield (
                f"copied {s.copying[0]}",
                replace(s, record=replace(record, copied=copied), copying=None),
            )
    elif step.action == "switch":
        switched = Listing(NEW, record.current, ListingPhase.SWITCHED)
        yield "switch", replace(s, record=switched, version=s.version + 1)
    elif step.action == "stop":
        stopped = replace(record, phase=ListingPhase.DROPPING)
        yield "stop", replace(s, record=stopped, version=s.version + 1)
    elif step.action == "drop":
        assert record.other is not None
        old = record.other
        cells = s.cells
        for b, j, _, _ in list(cells):
            if b == listing_bucket(j, old):
                cells = _write(cells, b, j, NOW, False)
        if cells != s.cells:
            yield "drop rows", replace(s, cells=cells)
        else:
            yield "done", replace(s, record=Listing(NEW), version=s.version + 1)


def explore(scope: Scope, variant: Variant = Variant()) -> int:
    cells: Cells = frozenset((listing_bucket(j, OLD), j, 1, True) for j in scope.initial)
    start = State(Listing(), 0, cells, 0, None, scope.reads, None, None, -1, 1)
    seen: set[State] = set()
    stack: list[tuple[State, tuple[str, ...]]] = [(start, ())]
    while stack:
        state, trace = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        try:
            steps = list(_steps(scope, variant, state))
        except Violation as error:
            raise Violation(f"{error}\ntrace: {' / '.join(trace)}") from None
        if not steps:
            _check_end(scope, state, trace)
        for says, after in steps:
            stack.append((after, (*trace, says)))
    return len(seen)


def _check_end(scope: Scope, s: State, trace: tuple[str, ...]) -> None:
    live = {j for j, present in _truth(scope, len(scope.actions)).items() if present}
    where = f"\ntrace: {' / '.join(trace)}"
    if s.record != Listing(NEW):
        raise Violation(f"the command did not finish: {s.record}{where}")
    if _listed(s.cells, NEW) != live:
        raise Violation(
            f"{NEW} buckets list {sorted(_listed(s.cells, NEW))}, live {sorted(live)}{where}"
        )
    if any(p and b < OLD for (b, _, _, p) in s.cells):
        raise Violation(f"rows of the {OLD}-bucket generation remain{where}")


SCOPES = {
    # a Purge of a listed journal while its bucket is copied
    "purge races copy": Scope(("a",), (("a", False),)),
    # purged and listed again, and a new journal, while the grow runs
    "relist": Scope(("a",), (("a", False), ("a", True), ("b", True))),
    # a new journal, and a journal purged, two readers' worth of reads
    "new and gone": Scope(("a", "c"), (("b", True), ("c", False)), reads=3),
}


@pytest.mark.parametrize("name", SCOPES)
def test_every_interleaving_keeps_the_listing(name: str) -> None:
    states = explore(SCOPES[name])
    assert states > 1_000  # the search went through the grow, not around it


@pytest.mark.parametrize(
    ("variant", "says"),
    [
        # the copy before every writer writes both: a journal listed only in the old one
        (Variant(wait=False), "listed False|buckets list"),
        # the copy stamped "now": a journal purged after its bucket was read comes back
        (Variant(copy_stamp=None), "listed True|buckets list"),
    ],
)
def test_broken_variants_are_caught(variant: Variant, says: str) -> None:
    with pytest.raises(Violation, match=says):
        for scope in SCOPES.values():
            explore(scope, variant)
