"""Growing the topic online (docs/growing.md), without I/O: the Seal's reserved id, the
registry's record of a grow and the command's next step, decided from that record alone.

A grow moves the journals of topic OLD (N partitions) to NEW (M = k * N partitions) one old
partition at a time: a Seal (a Mark with `SEAL_ID`) produced into OLD/p cuts it; the first
Seal of OLD/p is its cut, and the fold rejects every action after it (journal/core/fold.py,
`Verdict.MOVED`). The registry (the keyspace's `topic_grow`) holds the plan, the phase and,
per old partition, `low` (its end just before sealing) and `cut` (its first Seal's offset).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from journal.errors import InvalidValue

# the Seal's journal id: reserved, a journal of that id is refused (`check_not_reserved`)
SEAL_ID = "kafka-journal.seal"
# a Mark of a journal with this prefix carries an expiry candidate (epoch ms, after it) set
# before the journal moved (docs/growing.md, "Deadlines set before the move"): the grown
# topic's agent takes it as a candidate, as if an Append set it; a read ignores it, as any Mark
DEADLINE_MARK = "kafka-journal.deadline."


def deadline_mark(at: int) -> str:
    """The Mark id carrying the candidate deadline `at`."""
    return f"{DEADLINE_MARK}{at}"


def deadline_of_mark(mark_id: str) -> int | None:
    """The candidate a deadline Mark carries; None for any other Mark."""
    if not mark_id.startswith(DEADLINE_MARK):
        return None
    try:
        return int(mark_id[len(DEADLINE_MARK) :])
    except ValueError:
        return None  # not ours: a user's Mark of that look carries nothing


# the command waits this many `grow_lease_s` between recording its plan and its first Seal: a
# client's lease (a read that found no plan) then ends well before any Seal, whatever the
# drift of two monotonic clocks, a slow store read or a late callback
SEAL_AFTER_LEASES = 3


def seal_wait_s(plan_known: float, now: float, lease_s: float) -> float:
    """How long the command still waits before its first Seal: `plan_known` is when it knew
    the plan recorded (monotonic; a resumed run: when it read it), so a Seal comes at least
    `SEAL_AFTER_LEASES` leases after the plan, whoever recorded it."""
    return max(0.0, plan_known + SEAL_AFTER_LEASES * lease_s - now)


def check_not_reserved(journal_id: str) -> str:
    if journal_id == SEAL_ID:
        raise InvalidValue(f"the journal id {SEAL_ID!r} is reserved (the Seal of a grow)")
    return journal_id


class Phase(Enum):
    """The grow's phase, as the registry records it (docs/growing.md)."""

    PLANNED = "planned"  # OLD, NEW and M recorded
    CREATED = "created"  # NEW exists with M partitions; partitions are being cut, in order
    DONE = "done"  # every cut recorded


def new_topic_of(topic: str, partitions: int) -> str:
    """NEW's name: `<topic>.<M>`."""
    return f"{topic}.{partitions}"


def check_multiple(old: int, new: int) -> None:
    """InvalidValue unless `new` is a larger multiple of `old` (so that NEW/q holds journals
    of OLD/(q mod N) only), naming the counts it accepts."""
    if new <= old or new % old:
        accepted = ", ".join(str(old * k) for k in range(2, 5))
        raise InvalidValue(
            f"the topic has {old} partitions: it grows to a multiple of {old} only "
            f"({accepted}, ...), not {new}"
        )


@dataclass(frozen=True, slots=True)
class Grow:
    """The registry's record of a grow of `topic` (OLD) into `new_topic` (NEW)."""

    topic: str
    new_topic: str
    partitions: int  # M, NEW's count
    phase: Phase
    low: Mapping[int, int] = field(default_factory=dict)  # OLD/p's end just before sealing
    cut: Mapping[int, int] = field(default_factory=dict)  # OLD/p's first Seal's offset


@dataclass(frozen=True, slots=True)
class Step:
    """What the command does next: `action` on `partition` (None: the whole topic)."""

    action: str  # plan | create | mark_low | seal | record_cut | done | finished
    partition: int | None = None

    def __str__(self) -> str:
        return self.action if self.partition is None else f"{self.action} {self.partition}"


def next_step(grow: Grow | None, old_partitions: int, sealed: Mapping[int, int]) -> Step:
    """The command's next step, from the registry's record (`grow`) and the log (`sealed`:
    the first Seal found at or after each partition's `low`, for partitions whose cut is not
    recorded yet): never from an earlier run's memory, so a run killed anywhere resumes.

    Partitions are cut in order: 0, 1, ... A partition whose `low` is recorded but that holds
    no Seal since gets one; one holding a Seal gets its first Seal recorded as the cut (a
    second Seal, produced by a run killed before recording, changes nothing: only the first
    counts)."""
    if grow is None:
        return Step("plan")
    if grow.phase is Phase.PLANNED:
        return Step("create")
    if grow.phase is Phase.DONE:
        return Step("finished")
    for p in range(old_partitions):
        if p in grow.cut:
            continue
        if p not in grow.low:
            return Step("mark_low", p)
        if p not in sealed:
            return Step("seal", p)
        return Step("record_cut", p)
    return Step("done")


def partition_state(grow: Grow | None, partition: int, sealed: Mapping[int, int]) -> str:
    """What `--dry-run` says of an old partition: OPEN, SEALING (low recorded), CUT (a Seal in
    the log, not recorded) or RECORDED."""
    if grow is None or partition not in grow.low:
        return "OPEN"
    if partition in grow.cut:
        return f"RECORDED (cut at offset {grow.cut[partition]})"
    if partition in sealed:
        return f"CUT (Seal at offset {sealed[partition]}, not recorded yet)"
    return f"SEALING (end before sealing: {grow.low[partition]})"
