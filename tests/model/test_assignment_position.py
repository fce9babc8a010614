"""The position an assigned partition learns from its group's committed offset (issue 43),
checked as a model: every small scope, through the real `WorkerReplication` over memory.

A scope: the partition's records before the assignment (decodable or not), the group's
committed offset C (or none), how far the previous owner's store got, where Faust starts the
agent (C, or one before: a seek elsewhere), a record appended after the assignment or none, and
whether the assignment's catch-up (which learns C) runs before the agent's first record or
after. The tables start empty: every changelog write before the restart lost, the worst case.

The catch-up starts at the assignment, while the tables restore (app/worker.py `_App`): before
the agent's first record (Faust hands it none until the tables are recovered) the tables go
through what a restore leaves in them, the previous owner's entries of the records before the
assignment, a prefix at a time, then none (a stale partition emptied), then all of them.

At every step, what the worker publishes must be what a read as of any fence it reached may
trust (agents/replication.py says why): each record up to the published offset is either
handled by this agent (in the tables) or at or below the floor (read from the store, which
holds it). A read as of any fence, through the worker's `TableIndex`, never misses a record:
every record between what it needs of the store and its fence lies in the runs the tables
give, whatever part of them the restore brought so far. And a quiet partition (no record
after C) reaches its end without any record: the purger's fence (agents/expiry.py), which it
never reached before.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import agents.replication
from journal.core import Indexed, OffsetRuns
from journal.core.model import JournalKey
from tables.index import TableIndex
from tables.values import encode_runs
from tests.agents.memory import PARTITION, TOPIC, Agent, agent, replicated, until

A = JournalKey(TOPIC, "a")


@dataclass(frozen=True)
class Scope:
    decodable: tuple[bool, ...]  # the records before the assignment
    committed: int | None
    stored: int  # the store's pointer the previous owner left
    back: int  # Faust starts the agent this far before C (a seek elsewhere)
    later: bool  # a record appended after the assignment
    catch_up_first: bool

    def start(self) -> int:
        return 0 if self.committed is None else self.committed - self.back


def scopes() -> Iterator[Scope]:
    for n in range(3):
        for decodable in itertools.product((True, False), repeat=n):
            for committed in (None, *range(n + 1)):
                for stored in sorted({-1, n - 1, -1 if committed is None else committed - 1}):
                    backs = (0, 1) if committed else (0,)
                    for back, later, first in itertools.product(
                        backs, (False, True), (True, False)
                    ):
                        yield Scope(decodable, committed, stored, back, later, first)


def _published_is_trustworthy(ag: Agent, handled: set[int], log_end: int) -> None:
    processed, floor = ag.owned.processed(PARTITION), ag.owned.floor(PARTITION)
    if processed < 0:
        return
    assert processed < log_end  # never a position past the log
    for offset in range(processed + 1):
        if ag.log.records[offset] is None:
            continue  # undecodable: quarantined, no journal's record
        assert offset in handled or offset <= floor, (offset, processed, floor, handled)


async def _reads_are_whole(ag: Agent, log_end: int) -> None:
    """A read as of each fence the log had: what the index answers covers the journal's records
    below it (the store up to what it needs, and the runs above), whatever the tables hold."""
    index = TableIndex(ag.tables, ag.owned, 0.0)  # no waiting: what it answers now
    for fence in range(log_end + 1):
        answer = await index.lookup(A, PARTITION, fence)
        if not isinstance(answer, Indexed):
            continue  # the reader scans, or waits: nothing taken from the tables
        for offset in range(answer.needs + 1, fence):
            if ag.log.records[offset] is None:
                continue
            assert any(run.first <= offset <= run.last for run in answer.runs), (
                f"a read as of fence {fence} misses {offset}: needs {answer.needs}, "
                f"runs {answer.runs}"
            )


async def _restoring(ag: Agent, scope: Scope) -> None:
    """The tables while they restore: the previous owner's entries of the records before the
    assignment, a prefix at a time, then none (emptied as stale), then all; a read checked at
    each."""
    before = scope.committed if scope.committed is not None else len(scope.decodable)
    offsets = [o for o in range(before) if ag.log.records[o] is not None]
    states: list[OffsetRuns] = []
    runs = OffsetRuns()
    for offset in offsets:
        runs = runs.add(offset, -1)
        states.append(runs)
    for state in [OffsetRuns(), *states, OffsetRuns(), *states[-1:]]:
        ag.tables.appends.clear()
        if state.runs:
            ag.tables.appends[A.id.encode()] = encode_runs(state)
        await _reads_are_whole(ag, ag.log.end)
        _published_is_trustworthy(ag, set(), ag.log.end)


async def _caught_up(ag: Agent, through: int) -> None:
    await until(
        lambda: ag.log.replays and ag.owned.replicated(PARTITION) >= through,
        f"the assignment's catch-up through {through}",
    )


async def _run(scope: Scope) -> None:
    async with agent() as ag:
        for n, ok in enumerate(scope.decodable, start=1):
            if ok:
                ag.log.append(A, n, n)
            else:
                ag.log.undecodable(1)
        if scope.stored >= 0:
            await replicated(ag.store, ag.log, through=scope.stored)
        ag.log.committed = scope.committed
        if scope.later:
            ag.log.append(A, 10, 10)
        handled: set[int] = set()
        if not scope.catch_up_first:
            ag.log.gate.clear()
        ag.work.assigned(PARTITION)  # `agent()` made the assignment
        if scope.catch_up_first:
            await _caught_up(ag, max(scope.stored, ag.log.end - 1))
            await _reads_are_whole(ag, ag.log.end)
            _published_is_trustworthy(ag, handled, ag.log.end)
        await _restoring(ag, scope)  # the agent's records come once the tables are recovered
        for offset in range(scope.start(), ag.log.end):
            record = ag.log.records[offset]
            if record is None:
                continue  # the consumer goes past an undecodable batch
            await ag.handle(record)
            handled.add(offset)
            await _reads_are_whole(ag, ag.log.end)
            _published_is_trustworthy(ag, handled, ag.log.end)
        ag.log.gate.set()
        await _caught_up(ag, max(scope.stored, ag.log.end - 1))
        if handled and ag.log.records[-1] is not None:  # the agent handled the last record
            await until(lambda: ag.owned.processed(PARTITION) == ag.log.end - 1, "the end")
        await _reads_are_whole(ag, ag.log.end)
        _published_is_trustworthy(ag, handled, ag.log.end)
        if scope.committed is not None and scope.committed == ag.log.end:
            # quiet: no record for the agent, its position comes from C alone
            end = ag.log.end - 1
            await until(lambda: ag.owned.processed(PARTITION) == end, f"the quiet end {end}")
            _published_is_trustworthy(ag, handled, ag.log.end)


async def test_the_position_learnt_at_the_assignment_is_safe_and_reaches_a_quiet_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agents.replication, "BATCH_LINGER_S", 0.0)  # many scopes, kept short
    count = 0
    for scope in scopes():
        try:
            await _run(scope)
        except AssertionError as error:
            raise AssertionError(f"{scope}: {error}") from error
        count += 1
    assert count > 200  # the scopes were all run


async def test_the_model_catches_a_floor_short_of_the_position_learnt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the model can fail: a worker that tells readers a floor one short of the offset it
    # learnt publishes a record neither the tables nor the store's part cover
    monkeypatch.setattr(agents.replication, "BATCH_LINGER_S", 0.0)
    scope = Scope((True, True), committed=2, stored=-1, back=0, later=False, catch_up_first=True)
    original = agents.replication.WorkerReplication._learn_gap_end

    async def too_far(
        self: agents.replication.WorkerReplication,
        partition: int,
        state: agents.replication._ReplicatedPartition,
        source: agents.replication.ReplaySource,
    ) -> None:
        await original(self, partition, state, source)
        if state.gap_end != agents.replication.GAP_UNKNOWN:
            self._owned.set_floor(partition, state.gap_end - 1)  # the floor one short

    monkeypatch.setattr(agents.replication.WorkerReplication, "_learn_gap_end", too_far)
    with pytest.raises(AssertionError):
        await _run(scope)


async def test_the_model_catches_a_catch_up_publishing_the_end_while_the_tables_restore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the model can fail: a catch-up that publishes as progress the end it caught up to (the
    # store holds it) tells a reader the tables, still restoring, hold the record appended
    # after the assignment: the read misses it
    monkeypatch.setattr(agents.replication, "BATCH_LINGER_S", 0.0)
    scope = Scope((True,), committed=1, stored=0, back=0, later=True, catch_up_first=True)
    original = agents.replication.WorkerReplication._catch_up

    async def publishing_the_end(
        self: agents.replication.WorkerReplication,
        partition: int,
        state: agents.replication._ReplicatedPartition,
    ) -> None:
        await original(self, partition, state)
        if state.trusted:
            self._owned.advance(partition, state.pointer)

    monkeypatch.setattr(agents.replication.WorkerReplication, "_catch_up", publishing_the_end)
    with pytest.raises(AssertionError, match="a read as of fence 2 misses 1"):
        await _run(scope)
