"""Subscriptions and groups across a grow (docs/growing.md), checked as a model: every
interleaving of a subscriber's reads with the old partition's replication.

The rule under test (journal/subscriptions/subscription.py `_release`, groups.py `_upkeep`):
a grown partition NEW/q is read only once OLD/(q mod N) is delivered through its cut (a
subscription: its reader's cursor; a group: the group's committed offset, past the cut) and
replicated through it. A moved journal met first in NEW folds from its base: its row in OLD
as replication left it at that instant (`moved_bases`). Checked at every state: each
journal's delivered seqNrs are a prefix of what the fold accepted (the spec), each once and in
order; at every end: all of it. Broken rules must be caught: reading NEW before OLD is
delivered to the cut (order), or before OLD is replicated through it (a wrong base).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

import pytest

from journal.core.fold import JournalState, Verdict, rebased
from journal.core.model import AppendHeader, PayloadType, SeqRange

Rec = tuple[str, int] | None  # an Append of one event (journal, seqNr); None: the Seal

CUT = 3
OLD: tuple[Rec, ...] = (("a", 1), ("b", 1), ("a", 2), None, ("a", 3))  # the last one: MOVED
NEW: tuple[tuple[Rec, ...], ...] = (
    (("a", 3), ("a", 2), ("a", 4)),  # a's redo at 3; a stale writer's 2 (a conflict)
    (("b", 2),),
)
SPEC = {"a": (1, 2, 3, 4), "b": (1, 2)}  # what the fold accepted, journal by journal


class Rule(Enum):
    SUBSCRIPTION = "delivered and replicated through the cut"
    GROUP = "the group's commit past the cut, and replicated through it"
    NO_REPLICATION_WAIT = "delivered through the cut only"  # broken
    NO_ORDER = "replicated through the cut only"  # broken


@dataclass(frozen=True, slots=True)
class World:
    pointer: int = -1  # OLD's replication
    cursor: int = -1  # the subscriber's (or OLD's member's) last OLD offset handled
    committed: int = 0  # the group's committed offset of OLD (the next record to read)
    released: tuple[bool, ...] = (False, False)
    cursors: tuple[int, ...] = (-1, -1)  # per NEW partition
    states: tuple[tuple[str, JournalState], ...] = ()  # the subscriber's folds, by topic:id
    delivered: tuple[tuple[str, int], ...] = ()


def _append(seq_nr: int) -> AppendHeader:
    return AppendHeader(SeqRange(seq_nr, seq_nr), PayloadType.JSON)


def _row(pointer: int, journal: str) -> JournalState:
    """OLD's row of `journal` as replication left it at `pointer`."""
    state = JournalState()
    for offset, rec in enumerate(OLD[: pointer + 1]):
        if rec is not None and rec[0] == journal:
            state, _ = state.apply(_append(rec[1]), offset, CUT)
    return state


def _fold(world: World, key: str, rec: Rec, offset: int, base: JournalState) -> World:
    if rec is None:
        return world
    states = dict(world.states)
    state, verdict = states.get(key, base).apply(_append(rec[1]), offset, CUT)
    states[key] = state
    delivered = world.delivered
    if verdict is Verdict.APPENDED:
        delivered = (*delivered, rec)
    return replace(world, states=tuple(sorted(states.items())), delivered=delivered)


def _may_release(world: World, rule: Rule) -> bool:
    delivered = world.cursor >= CUT if rule is not Rule.GROUP else world.committed > CUT
    replicated = world.pointer >= CUT
    if rule is Rule.NO_REPLICATION_WAIT:
        return delivered
    if rule is Rule.NO_ORDER:
        return replicated
    return delivered and replicated


def _steps(world: World, rule: Rule) -> list[tuple[str, World]]:
    steps = []
    if world.pointer + 1 < len(OLD):
        steps.append(("replicate", replace(world, pointer=world.pointer + 1)))
    if world.cursor + 1 < len(OLD):
        offset = world.cursor + 1
        rec = OLD[offset]
        key = "old:" + ("" if rec is None else rec[0])
        read = _fold(world, key, rec, offset, JournalState())
        steps.append((f"read old@{offset}", replace(read, cursor=offset)))
    if rule is Rule.GROUP and world.committed < world.cursor + 1:
        steps.append(("commit", replace(world, committed=world.cursor + 1)))
    for q, log in enumerate(NEW):
        if not world.released[q]:
            if _may_release(world, rule):
                released = tuple(r or i == q for i, r in enumerate(world.released))
                steps.append((f"release new/{q}", replace(world, released=released)))
            continue
        if world.cursors[q] + 1 < len(log):
            offset = world.cursors[q] + 1
            rec = log[offset]
            assert rec is not None
            base = rebased(_row(world.pointer, rec[0]))  # a row in NEW: none replicated here
            read = _fold(world, f"new:{rec[0]}", rec, offset, base)
            cursors = tuple(offset if i == q else c for i, c in enumerate(world.cursors))
            steps.append((f"read new/{q}@{offset}", replace(read, cursors=cursors)))
    return steps


def _check(world: World, trace: list[str], end: bool) -> None:
    for journal, accepted in SPEC.items():
        got = tuple(n for j, n in world.delivered if j == journal)
        wanted = accepted if end else accepted[: len(got)]
        assert got == wanted, f"{journal}: delivered {got}, accepted {accepted}; steps: {trace}"


def explore(rule: Rule) -> int:
    """Every interleaving from the start (memoised); the states visited."""
    seen: set[World] = set()

    def visit(world: World, trace: list[str]) -> None:
        if world in seen:
            return
        seen.add(world)
        steps = _steps(world, rule)
        _check(world, trace, end=not steps)
        for what, after in steps:
            visit(after, [*trace, what])

    visit(World(), [])
    return len(seen)


@pytest.mark.parametrize("rule", [Rule.SUBSCRIPTION, Rule.GROUP])
def test_every_interleaving_delivers_each_journal_once_in_order(rule: Rule) -> None:
    assert explore(rule) > 100  # the search went somewhere


@pytest.mark.parametrize("rule", [Rule.NO_REPLICATION_WAIT, Rule.NO_ORDER])
def test_a_broken_release_rule_is_caught(rule: Rule) -> None:
    with pytest.raises(AssertionError, match="delivered"):
        explore(rule)
