"""The grow protocol (docs/growing.md) checked as a model: every interleaving of small scopes.

Each scope is searched exhaustively by `tests.support.grow_model.explore`: writers through two
worker processes (verified appends, appends at the end, deletes, purges), a reader, the mover
(the `kafka-journal topic grow` command) and replication, with kill -9 of the mover and of a
worker at every point. Any broken invariant fails with its counterexample (the steps). The
broken variants below must be caught: the model can fail.
"""

from __future__ import annotations

import pytest

from tests.support.grow_model import Op, Rec, Scope, Stats, Variant, Violation, explore

A1 = (Rec("append", "a", 1, 1, "init"),)  # journal a holds seqNr 1 in OLD before the grow
A2 = (Rec("append", "a", 1, 2, "init"),)

SCOPES: dict[str, Scope] = {
    # two verified appends race for seqNr 2 across the move, a reader in between
    "race": Scope(
        1,
        2,
        (("a", 0),),
        (Op("W1", "append", "a", "w1", expected=1), Op("W2", "append", "a", "w2", expected=1)),
        initial=A1,
        worker_crashes=0,
        replication=False,
    ),
    # a read whose two fences (OLD's, then NEW's) straddle the cut, with a writer
    "read across": Scope(
        1,
        2,
        (("a", 0),),
        (Op("W1", "append", "a", "w1", expected=1), Op("R", "read", "a", "w2")),
        initial=A1,
        replication=False,
    ),
    # an append at the end against a delete
    "end+delete": Scope(
        1,
        2,
        (("a", 1),),
        (
            Op("E", "at_end", "a", "w1"),
            Op("D", "delete", "a", "w2", to=2),
        ),
        initial=A2,
        mover_crashes=0,
        replication=False,
    ),
    # a purge against an append at the end
    "purge+end": Scope(
        1,
        2,
        (("a", 0),),
        (Op("P", "purge", "a", "w1"), Op("E", "at_end", "a", "w2")),
        initial=A1,
        replication=False,
    ),
    # replication follows: a writer and a reader while the store's rows move to NEW
    "replication": Scope(
        1,
        2,
        (("a", 1),),
        (Op("W1", "append", "a", "w1", expected=1), Op("R", "read", "a", "w2")),
        initial=A1,
        worker_crashes=0,
    ),
    # two old partitions cut one after the other: b's partition stays open meanwhile
    "two partitions": Scope(
        2,
        4,
        (("a", 2), ("b", 1)),
        (Op("Wa", "append", "a", "w1", expected=1), Op("Wb", "at_end", "b", "w2")),
        initial=A1,
        worker_crashes=0,
        replication=False,
    ),
}


@pytest.mark.parametrize("name", SCOPES)
def test_the_protocol_keeps_every_invariant_in_every_interleaving(name: str) -> None:
    stats = explore(SCOPES[name])
    print(f"{name}: {_counts(stats)}")  # the report's numbers (pytest -s)
    assert stats.end_states > 0 and stats.crash_points > 0


@pytest.mark.parametrize(
    ("variant", "scope", "broken"),
    [
        # a stale writer's append after a cut no log shows is acknowledged, then lost
        (Variant.NO_SEAL, "race", "after the cut"),
        # a second Seal recorded as the cut: the registry no longer holds the log's decision
        (Variant.RESUME_BLIND, "race", "not its first Seal"),
        # NEW's row built from an OLD row that lacked the journal's last appends
        (Variant.EARLY_BASE, "replication", "at the end"),
    ],
)
def test_a_broken_protocol_is_caught_with_a_counterexample(
    variant: Variant, scope: str, broken: str
) -> None:
    with pytest.raises(Violation) as caught:
        explore(SCOPES[scope], variant)
    print(f"{variant.value}: {caught.value}")
    assert broken in caught.value.what
    assert caught.value.trace  # the steps that lead there


def _counts(stats: Stats) -> str:
    return (
        f"{stats.states} states, {stats.interleavings} interleavings, "
        f"{stats.crash_points} kill -9 points, {stats.end_states} end states"
    )
