"""Deadlines set before a move, carried into the grown topic's expiry tables (docs/growing.md,
"Deadlines set before the move"), checked as a model before it is built: every interleaving of
small scopes.

OLD/p's records up to its cut set, clear or leave each journal's expiry candidate (the rule of
tables/expiry.py: the earliest candidate since the journal's last Purge). OLD's group handles
them with its agent (the table), flushes the table to its changelog and only then commits the
records' offset (Faust's order), and may stop for good at any point: every worker restarted
onto NEW. A member of NEW's group carries p's candidates into NEW's table once (for its
partition q of NEW; here one q holds every journal of p):
1. read OLD's group's committed offset of p, c;
2. read OLD's changelog of p, entry by entry, as it is now (the agent may go on meanwhile);
3. read OLD/p's records from c to the cut and fold their candidates;
each candidate found is a Mark in NEW/q its agent turns into a candidate of NEW's table (the
earliest wins, as for any candidate); then a last Mark "carried", which the agent records. A
kill -9 of the member loses its progress: the carry starts again at 1 unless "carried" is
recorded (repeated Marks are harmless: the earliest wins, and the purger confirms every
candidate by reading the journal's true deadline).

Checked at every end state: once "carried" is recorded, NEW's table has, for every journal
with a true candidate at the cut (the table rule over all of OLD/p up to it), a candidate no
later than it, so no journal that expires in OLD is left without a purger. Candidates of
journals without one (a Purge after the changelog entry was read) are allowed: the purger's
read drops them. The broken variants must be caught: the model can fail.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import pytest

Kind = Literal["expire", "plain", "purge"]
Record = tuple[str, Kind, int]  # journal, what it does, the candidate an "expire" sets
Table = tuple[tuple[str, int], ...]  # journal -> candidate, sorted


def handle(table: dict[str, int], record: Record) -> None:
    """tables/expiry.py's rule: the earliest candidate since the journal's last Purge."""
    journal, kind, at = record
    if kind == "purge":
        table.pop(journal, None)
    elif kind == "expire":
        table[journal] = min(at, table.get(journal, at))


def fold(records: tuple[Record, ...]) -> dict[str, int]:
    table: dict[str, int] = {}
    for record in records:
        handle(table, record)
    return table


@dataclass(frozen=True)
class Variant:
    committed_first: bool = True  # step 1 before step 2
    log_tail: bool = True  # step 3


@dataclass(frozen=True)
class State:
    handled: int  # OLD's agent: records handled
    flushed: int  # OLD's changelog holds the table as of this many records
    committed: int  # OLD's group's committed offset (never past `flushed`)
    old_alive: bool
    step: int  # the carry: 0 not started, 1 committed read, 2 changelog read, 3 tail read
    c: int  # the committed offset the carry read (-1: none yet)
    read_entries: int  # changelog entries read in step 2 (journals in sorted order)
    new: Table  # NEW's table as its agent built it from the Marks
    carried: bool
    kills: int


class Violation(AssertionError):
    """A broken rule, with the steps that led to it."""


def _put(table: Table, journal: str, at: int) -> Table:
    merged = dict(table)
    merged[journal] = min(at, merged.get(journal, at))
    return tuple(sorted(merged.items()))


def successors(
    state: State, log: tuple[Record, ...], journals: tuple[str, ...], variant: Variant
) -> list[tuple[str, State]]:
    cut = len(log)
    moves: list[tuple[str, State]] = []
    if state.old_alive:
        if state.handled < cut:
            moves.append(("old handles", replace(state, handled=state.handled + 1)))
        if state.flushed < state.handled:
            moves.append(("old flushes", replace(state, flushed=state.handled)))
        if state.committed < state.flushed:
            moves.append(("old commits", replace(state, committed=state.flushed)))
        moves.append(("old's group gone", replace(state, old_alive=False)))
    if state.carried:
        return moves
    if state.kills:
        moves.append(
            (
                "new member killed -9",
                replace(state, step=0, c=-1, read_entries=0, kills=state.kills - 1),
            )
        )
    changelog = fold(log[: state.flushed])
    if state.step == 0:
        if variant.committed_first:
            moves.append(("carry reads committed", replace(state, step=1, c=state.committed)))
        else:
            moves.append(("carry starts on the changelog", replace(state, step=1)))
    elif state.step == 1:
        if state.read_entries < len(journals):
            journal = journals[state.read_entries]
            new = state.new
            if journal in changelog:
                new = _put(new, journal, changelog[journal])
            moves.append(
                (
                    f"carry reads entry {journal}",
                    replace(state, read_entries=state.read_entries + 1, new=new),
                )
            )
        else:
            c = state.c if variant.committed_first else state.committed
            moves.append(("carry read the changelog", replace(state, step=2, c=c)))
    elif state.step == 2:
        new = state.new
        if variant.log_tail:
            # the tail's candidates, as a fold of it from c (its Purges clear what came before
            # in it; one that clears a carried entry leaves a candidate the purger drops)
            for journal, at in fold(log[state.c :]).items():
                new = _put(new, journal, at)
        moves.append(
            ("carry read the tail, marked carried", replace(state, step=3, new=new, carried=True))
        )
    return moves


def check(log: tuple[Record, ...], kills: int, variant: Variant) -> int:
    """Explore every interleaving; the number of states seen."""
    journals = tuple(sorted({record[0] for record in log}))
    truth = fold(log)
    start = State(0, 0, 0, True, 0, -1, 0, (), False, kills)
    seen = {start}
    stack: list[tuple[State, tuple[str, ...]]] = [(start, ())]
    while stack:
        state, trace = stack.pop()
        if state.carried:
            new = dict(state.new)
            for journal, at in truth.items():
                if journal not in new or new[journal] > at:
                    raise Violation(f"{journal} due at {at} has {new.get(journal)} in NEW: {trace}")
        for label, following in successors(state, log, journals, variant):
            if following not in seen:
                seen.add(following)
                stack.append((following, (*trace, label)))
    return len(seen)


LOGS: tuple[tuple[Record, ...], ...] = (
    (("a", "expire", 5), ("b", "expire", 3), ("a", "expire", 2)),
    (("a", "expire", 5), ("a", "purge", 0), ("a", "expire", 7), ("b", "plain", 0)),
    (("a", "expire", 4), ("b", "expire", 6), ("b", "purge", 0), ("a", "expire", 1)),
    (("a", "purge", 0), ("a", "expire", 9), ("b", "expire", 2), ("a", "expire", 3)),
)


@pytest.mark.parametrize("log", LOGS)
def test_every_deadline_set_before_the_cut_reaches_new(log: tuple[Record, ...]) -> None:
    assert check(log, kills=1, variant=Variant()) > 10


@pytest.mark.parametrize(
    "variant",
    [Variant(committed_first=False), Variant(log_tail=False)],
    ids=["changelog before the committed offset", "no tail from the log"],
)
def test_a_broken_carry_is_caught(variant: Variant) -> None:
    with pytest.raises(Violation):
        for log in LOGS:
            check(log, kills=1, variant=variant)
