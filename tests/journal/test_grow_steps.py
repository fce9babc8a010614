"""The grow command's next step (journal/core/grow.py), decided from the registry and the log
alone: what a run killed at any point resumes from."""

from __future__ import annotations

import pytest

from journal.core.grow import Grow, Phase, Step, check_multiple, next_step, partition_state
from journal.errors import InvalidValue


def grow(
    phase: Phase, low: dict[int, int] | None = None, cut: dict[int, int] | None = None
) -> Grow:
    return Grow("t", "t.6", 6, phase, low or {}, cut or {})


@pytest.mark.parametrize(
    ("record", "sealed", "step"),
    [
        (None, {}, Step("plan")),
        (grow(Phase.PLANNED), {}, Step("create")),
        (grow(Phase.CREATED), {}, Step("mark_low", 0)),
        # killed after recording low: OLD/0 still open, the resumed run seals it
        (grow(Phase.CREATED, low={0: 5}), {}, Step("seal", 0)),
        # killed after the Seal, before its record: the log's first Seal is recorded
        (grow(Phase.CREATED, low={0: 5}), {0: 7}, Step("record_cut", 0)),
        (grow(Phase.CREATED, low={0: 5}, cut={0: 7}), {}, Step("mark_low", 1)),
        (grow(Phase.CREATED, low={0: 5, 1: 0}, cut={0: 7}), {}, Step("seal", 1)),
        (grow(Phase.CREATED, low={0: 5, 1: 0, 2: 3}, cut={0: 7, 1: 0, 2: 4}), {}, Step("done")),
        (grow(Phase.DONE, cut={0: 7, 1: 0, 2: 4}), {}, Step("finished")),
    ],
)
def test_each_state_has_one_next_step(
    record: Grow | None, sealed: dict[int, int], step: Step
) -> None:
    assert next_step(record, 3, sealed) == step


def test_a_run_follows_the_steps_to_the_end_from_any_state() -> None:
    """Walk the steps as the command takes them (each step's effect on the registry and the
    log), starting over from the registry after every step: it ends in 'finished' after
    exactly the steps left, whatever step it started from."""

    def take(record: Grow | None, log: dict[int, list[int]], step: Step) -> Grow | None:
        p = step.partition
        if step.action == "plan":
            return grow(Phase.PLANNED)
        assert record is not None
        if step.action == "create":
            return grow(Phase.CREATED)
        assert p is not None or step.action == "done"
        if step.action == "mark_low":
            assert p is not None
            return Grow("t", "t.6", 6, record.phase, {**record.low, p: 10 * p}, record.cut)
        if step.action == "seal":
            assert p is not None
            log[p].append(10 * p + len(log[p]))
            return record
        if step.action == "record_cut":
            assert p is not None
            return Grow("t", "t.6", 6, record.phase, record.low, {**record.cut, p: log[p][0]})
        return Grow("t", "t.6", 6, Phase.DONE, record.low, record.cut)

    def sealed(record: Grow | None, log: dict[int, list[int]]) -> dict[int, int]:
        if record is None:
            return {}
        return {p: s[0] for p, s in log.items() if s and p in record.low and p not in record.cut}

    record: Grow | None = None
    log: dict[int, list[int]] = {0: [], 1: [], 2: []}
    steps = []
    while (step := next_step(record, 3, sealed(record, log))).action != "finished":
        steps.append(str(step))
        record = take(record, log, step)
    assert steps == [
        "plan",
        "create",
        *(s for p in range(3) for s in (f"mark_low {p}", f"seal {p}", f"record_cut {p}")),
        "done",
    ]
    assert record is not None and record.cut == {0: 0, 1: 10, 2: 20}
    assert all(len(s) == 1 for s in log.values())  # one Seal each when nothing was killed


def test_only_a_larger_multiple_is_accepted() -> None:
    check_multiple(3, 6)
    check_multiple(8, 16)
    for wrong in (3, 4, 7, 2):
        with pytest.raises(InvalidValue, match="multiple of 3 only"):
            check_multiple(3, wrong)


def test_dry_run_names_each_partitions_state() -> None:
    record = grow(Phase.CREATED, low={0: 5, 1: 9}, cut={0: 7})
    assert partition_state(record, 0, {}) == "RECORDED (cut at offset 7)"
    assert partition_state(record, 1, {1: 11}).startswith("CUT (Seal at offset 11")
    assert partition_state(record, 1, {}).startswith("SEALING")
    assert partition_state(record, 2, {}) == "OPEN"
