"""Issue 38, item 1: what the fold rejects has no effect of any kind, anywhere it could be derived.

One property over random interleavings of rival writers (each with its own, often stale, idea of
a journal's last seqNr, so their Appends conflict; retries that duplicate; some Appends with an
`expireAfter`, some without), Deletes, Purges and the purger's ticks: every derived effect of the
whole log equals the one of the log with the rejected Appends taken out, and what the fold over
the accepted actions alone gives:
- expiry: the purger purges, at each tick, only journals whose accepted deadline passed, and
  in the end all of them (the index's candidates, confirmed through the fold as the reading
  flow does; a window of 2, so its reloads are exercised and a tick may leave some to the next);
- listing: whether a journal exists (`JournalState.exists`, what `journal.client.listing` asks);
- subscriptions and groups: the Appends a partition's reader delivers (`_PartitionReader._fold`,
  the one place both decide it);
- replication: `fold_batch`'s writes, in any batching.
Tables and index runs are left out: they list every record's offset, rejected or not, and every
read folds what they point at, so a rejected record there is only a record read and rejected
again.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.expiry import Expirer
from journal.core.fold import JournalState, fold_batch
from journal.core.model import ActionRecord, JournalKey
from journal.store.memory import MemoryStore
from journal.subscriptions.subscription import _PartitionReader
from tables.expiry import TIMED, ExpiryIndex
from tables.partitions import OwnedPartitions
from tests.support import actions as a
from tests.support.expiry import T0_MS, Log, Table, append, fold_deadline

JOURNALS = ("j0", "j1", "j2")
EXPIRE_AFTER = (None, None, "1 second", "3 seconds", "10 seconds")
OFFSETS = 100  # past every offset of an interleaving
EXAMPLES = 400  # interleavings per run (the report of issue 38 quotes it)


@dataclass(frozen=True)
class Step:
    kind: str  # append, retry, look, delete, purge, tick
    journal: int
    writer: int
    count: int
    expire: int
    wait_ms: int


steps = st.lists(
    st.builds(
        Step,
        st.sampled_from(["append"] * 6 + ["retry", "look", "delete", "purge", "tick", "tick"]),
        st.integers(0, len(JOURNALS) - 1),
        st.integers(0, 1),
        st.integers(1, 2),
        st.integers(0, len(EXPIRE_AFTER) - 1),
        st.integers(0, 2500),
    ),
    max_size=40,
)


class Interleaving:
    """The log as rival writers, a deleter, a purger and the expirer make it."""

    def __init__(self) -> None:
        self.log = Log()
        self.table = Table()
        self.index = ExpiryIndex(self.table, bound=2)
        self.owned = OwnedPartitions()
        self.owned.assign(0)
        self.expirer = Expirer(
            "t", self.index, self.owned, self.log, self.log, lambda: True, 0.2, self.log
        )
        self.now_ms = T0_MS
        # per (journal, writer): the last seqNr the writer believes the journal has, and its
        # last Append (a retry sends it again)
        self.believes: dict[tuple[int, int], int] = {}
        self.last: dict[tuple[int, int], tuple[int, int]] = {}
        self.purged_by_ticks: list[set[str]] = []
        self.expected_by_ticks: list[set[str]] = []

    def add(self, action: ActionRecord) -> None:
        self.log.end = action.offset + 1
        self.log.handle(self.index, action)  # the agent handles it
        self.table.assert_in_step(0)  # the deadlines by time are the deadlines by id
        self.owned.advance(0, action.offset)

    def key(self, journal: int) -> JournalKey:
        return JournalKey("t", JOURNALS[journal])

    def truth(self, journal: int) -> JournalState:
        state = JournalState()
        for action in self.log.log:
            if action.key == self.key(journal):
                state, _ = state.apply(action.header, action.offset)
        return state

    async def step(self, step: Step) -> None:
        self.now_ms += step.wait_ms
        offset, after_ms = self.log.end, self.now_ms - T0_MS
        writer = (step.journal, step.writer)
        journal_id = JOURNALS[step.journal]
        if step.kind == "look":
            self.believes[writer] = self.truth(step.journal).seq_nr
        elif step.kind in ("append", "retry"):
            if step.kind == "retry" and writer in self.last:
                first, count = self.last[writer]
            else:
                first, count = self.believes.get(writer, 0) + 1, step.count
            expire = EXPIRE_AFTER[step.expire]
            self.add(append(journal_id, offset, expire, after_ms, seq_nr=first, count=count))
            self.believes[writer] = first + count - 1
            self.last[writer] = (first, count)
        elif step.kind == "delete":  # up to a seqNr the journal may or may not have
            self.add(a.delete(self.key(step.journal), offset, step.count + step.expire))
        elif step.kind == "purge":
            self.add(a.purge(self.key(step.journal), offset))
        else:
            await self.tick()

    async def tick(self) -> None:
        expected = {
            journal_id
            for journal_id in JOURNALS
            if (at := self.accepted_deadline(journal_id)) is not None and at <= self.now_ms
        }
        before = len(self.log.purges)
        await self.expirer.tick(self.now_ms)
        purged = {key.id for key, _ in self.log.purges[before:]}
        self.purged_by_ticks.append(purged)
        self.expected_by_ticks.append(expected)
        for journal_id in sorted(purged):  # the Purges produced reach the log and the agent
            self.add(a.purge(JournalKey("t", journal_id), self.log.end))

    def accepted_deadline(self, journal_id: str) -> int | None:
        """The fold over the accepted actions alone: the last accepted Append's deadline."""
        return fold_deadline(accepted_only(a for a in self.log.log if a.key.id == journal_id))


def accepted_only(actions: Iterable[ActionRecord]) -> list[ActionRecord]:
    """`actions` (of any journals, in log order) without the Appends the fold rejects."""
    states: dict[JournalKey, JournalState] = {}
    kept = []
    for action in actions:
        state = states.get(action.key, JournalState())
        states[action.key], verdict = state.apply(action.header, action.offset)
        if not verdict.rejected:
            kept.append(action)
    return kept


def exists(actions: Sequence[ActionRecord]) -> dict[str, bool]:
    states = {journal_id: JournalState() for journal_id in JOURNALS}
    for action in actions:
        states[action.key.id], _ = states[action.key.id].apply(action.header, action.offset)
    return {journal_id: state.exists for journal_id, state in states.items()}


def delivered(actions: Sequence[ActionRecord]) -> list[int]:
    """The offsets a subscription (or a group member) delivers, folding from offset 0."""
    reader = _PartitionReader(MemoryStore(), "t", 0, -1)
    return [action.offset for action in reader._fold(actions, set())]


def replicated(actions: Sequence[ActionRecord], cuts: Sequence[int]) -> list[object]:
    """What `fold_batch` changes in the store, batch after batch (cut at the same offsets
    whatever was taken out), each onto the states the one before left."""
    stored: dict[JournalKey, JournalState] = {}
    bounds = sorted({0, OFFSETS, *(min(c, OFFSETS) for c in cuts)})
    writes: list[object] = []
    for low, high in itertools.pairwise(bounds):
        batch = [action for action in actions if low <= action.offset < high]
        written = {}  # a batch's journals are written independently: their order is not kept
        for write in fold_batch(batch, stored):
            if write.changes_store:  # the others are not written (`Replicator`)
                stored[write.key] = write.after
                appends = [append.offset for append in write.appends]
                written[write.key.id] = (write.after, write.purge, appends, write.delete)
        writes.append(written)
    return writes


@settings(max_examples=EXAMPLES, deadline=None)
@given(steps, st.lists(st.integers(0, 60), max_size=4))
def test_a_rejected_append_has_no_effect_anywhere(plan: list[Step], cuts: list[int]) -> None:
    world = Interleaving()

    async def run() -> None:
        for step in plan:
            await world.step(step)
        world.now_ms += 20_000  # every deadline in the past: ticks purge them all
        for _ in range(len(JOURNALS) + 1):  # a window of 2 answers 2 at a time
            await world.tick()

    asyncio.run(run())
    assert not world.log.log or TIMED in world.table.by_time.partitions[0]  # so checked
    # never a purge the accepted actions do not call for; every one they call for, in time
    for purged, expected in zip(world.purged_by_ticks, world.expected_by_ticks, strict=True):
        assert purged <= expected
    assert [world.accepted_deadline(journal_id) for journal_id in JOURNALS] == [None] * 3
    log = world.log.log
    accepted = accepted_only(log)
    assert exists(log) == exists(accepted)
    assert delivered(log) == delivered(accepted)
    assert replicated(log, cuts) == replicated(accepted, cuts)
