"""The workers' move onto a grown topic (docs/growing.md, "The workers move to the grown
topic"), checked as a model before it is built: every interleaving of small scopes.

The protocol's replication roles, as a worker of either group plays them:
- a worker of OLD's group (its Faust app on OLD) replicates the OLD partitions it is assigned
  with its agent, and the successors NEW/q (q mod N = p) of each OLD/p it is assigned, once
  OLD/p is replicated through its cut (the loop that runs today);
- a worker of NEW's group (restarted onto the grown topic) replicates the NEW partitions it is
  assigned with its agent once their predecessor OLD/(q mod N) is replicated through its cut
  (a moved journal's base is final then), and until then catches that predecessor up to its
  cut itself (OLD's group may be gone: every worker restarted).
Workers restart onto NEW one by one (a rolling restart, each a kill -9 and a start) and may
stop for good; the partitions of each group go to its live members. A step replicates one
record (row and pointer: replication's own crash points are its own, checked elsewhere).

Checked in every reachable state: no NEW partition is replicated past nothing while its
predecessor is short of its cut (its moved journals' bases would not be final); and every run
that can go no further with a worker alive has replicated everything (no stall at any point
of the restart). The broken variants must be caught: the model can fail.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

import pytest

OLD, NEW, GONE = "old", "new", "gone"


@dataclass(frozen=True)
class Scope:
    cuts: tuple[int, ...]  # records before the cut, per OLD partition (N = len)
    new_records: tuple[int, ...]  # records per NEW partition (M = len, a multiple of N)
    workers: int
    stops: int  # workers that may stop for good


@dataclass(frozen=True)
class Variant:
    gate: bool = True  # NEW's agent waits for its predecessor's cut
    catch_up: bool = True  # NEW's group replicates a predecessor short of its cut


@dataclass(frozen=True)
class State:
    old: tuple[int, ...]  # pointer (records replicated) per OLD partition
    new: tuple[int, ...]
    groups: tuple[str, ...]  # each worker's group: OLD, NEW or GONE
    stops: int


class Violation(AssertionError):
    """A broken rule, with the steps that led to it."""


def owners(groups: tuple[str, ...], group: str, partitions: int) -> dict[int, int]:
    """Partition -> worker: the group's live members in turn (an assignor's round robin)."""
    members = [w for w, g in enumerate(groups) if g == group]
    return {p: members[p % len(members)] for p in range(partitions)} if members else {}


def steps(scope: Scope, variant: Variant, state: State) -> list[tuple[str, State]]:
    n, m = len(scope.cuts), len(scope.new_records)
    out: list[tuple[str, State]] = []

    def old_step(p: int, who: str) -> None:
        if state.old[p] < scope.cuts[p]:
            old = list(state.old)
            old[p] += 1
            out.append((f"{who} replicates OLD/{p}", replace(state, old=tuple(old))))

    def new_step(q: int, who: str) -> None:
        if state.new[q] < scope.new_records[q]:
            if state.old[q % n] < scope.cuts[q % n]:
                raise Violation(f"{who} replicated NEW/{q} before OLD/{q % n} reached its cut")
            new = list(state.new)
            new[q] += 1
            out.append((f"{who} replicates NEW/{q}", replace(state, new=tuple(new))))

    for p, w in owners(state.groups, OLD, n).items():
        old_step(p, f"W{w} (OLD's agent)")
        if state.old[p] == scope.cuts[p]:  # the successor loop's wait
            for q in range(p, m, n):
                new_step(q, f"W{w} (successor loop)")
    for q, w in owners(state.groups, NEW, m).items():
        if not variant.gate or state.old[q % n] == scope.cuts[q % n]:
            new_step(q, f"W{w} (NEW's agent)")
        elif variant.catch_up:
            old_step(q % n, f"W{w} (catching up)")
    for w, group in enumerate(state.groups):
        groups = list(state.groups)
        if group == OLD:  # a rolling restart's step: kill -9, started on NEW
            groups[w] = NEW
            out.append((f"W{w} restarts onto NEW", replace(state, groups=tuple(groups))))
        if group != GONE and state.stops > 0:
            groups[w] = GONE
            stopped = replace(state, groups=tuple(groups), stops=state.stops - 1)
            out.append((f"W{w} stops", stopped))
    return out


def explore(scope: Scope, variant: Variant) -> set[State]:
    """Every state reachable. Raises Violation with its path."""
    start = State(
        tuple(0 for _ in scope.cuts),
        tuple(0 for _ in scope.new_records),
        tuple(OLD for _ in range(scope.workers)),
        scope.stops,
    )
    seen: set[State] = set()
    stack: list[tuple[State, tuple[str, ...]]] = [(start, ())]
    while stack:
        state, path = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        try:
            following = steps(scope, variant, state)
        except Violation as error:
            raise Violation(f"{error}; after: {list(path)}") from None
        if not following and any(g != GONE for g in state.groups):
            done = state.old == scope.cuts and state.new == scope.new_records
            if not done:
                raise Violation(f"stalled at {state}; after: {list(path)}")
        stack.extend((after, (*path, step)) for step, after in following)
    return seen


SCOPES = {
    "one partition, two workers": Scope((2,), (1, 2), workers=2, stops=1),
    "two partitions, two workers": Scope((1, 2), (1, 1, 2, 1), workers=2, stops=1),
    "two partitions, three workers": Scope((2, 1), (1, 0, 1, 2), workers=3, stops=2),
}


@pytest.mark.parametrize("name", SCOPES)
def test_the_switch_replicates_everything_and_never_early(name: str) -> None:
    states = explore(SCOPES[name], Variant())
    assert len(states) > 50  # the scope was searched, not cut short


@pytest.mark.parametrize(
    ("variant", "found"),
    [
        (Variant(catch_up=False), "stalled"),  # everyone restarted before OLD reached its cuts
        (Variant(gate=False), "before OLD/"),  # a moved journal replicated without its base
    ],
)
def test_a_broken_switch_is_caught(variant: Variant, found: str) -> None:
    scope = SCOPES["one partition, two workers"]
    with pytest.raises(Violation, match=found):
        explore(scope, variant)


def test_the_scopes_cover_every_restart_order() -> None:
    """Each worker restarted or not, stopped or not, at every pointer: the restarts' crash
    points are all reached (a state per combination the scope allows)."""
    scope = SCOPES["one partition, two workers"]
    groups = {g for g in product((OLD, NEW, GONE), repeat=scope.workers) if g.count(GONE) <= 1}
    assert {state.groups for state in explore(scope, Variant())} == groups
