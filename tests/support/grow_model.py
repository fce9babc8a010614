"""An executable model of growing the action topic online (docs/growing.md): test code only.

The protocol, in one paragraph: the command (the "mover") records a plan in the registry,
creates the new topic NEW with M = k * N partitions, then cuts each partition p of OLD by
producing a Seal record into it and recording, in the registry, the offset of the *first* Seal
of p (the log decides which one: a resumed mover may produce a second). Every action of OLD/p
after that first Seal is rejected by the fold (verdict MOVED: never visible, never replicated);
its writer learns the move from that verdict and redoes the action in NEW. A journal of p lives
from then on in NEW/partition_of(id, M), continuing from its state in OLD/p up to the Seal (the
"base"). Replication of NEW takes a journal's base from the store only once OLD/p is replicated
through its Seal.

What the model holds: the logs (OLD and NEW partitions, lists of records), the registry, the
store (a row per (topic, journal), a pointer per partition), and actors that take one atomic
step at a time: writers (verified appends, appends at the end, deletes, purges), readers, the
mover and a replicator; workers and the mover can be killed (-9) between any two steps. Every
process decides from what it reads at that step, so a look followed by a produce is a stale
view as soon as anything happens in between.

What it checks, against a *spec* kept beside it (a journal is one sequential object; an action
takes effect at the instant its record is produced, unless it landed in a partition already
cut, where it must have no effect at all):
- every answer agrees with the spec: an accepted append took effect (no acknowledged append
  lost, none doubled, one winner per seqNr), a 409 did not, a delete answers the spec's deleteTo;
- a read returns the spec's state at some instant between its first and its last step
  (linearizable: read-your-writes, deletes and purges honoured, no rejected record visible);
- an operation is moved at most once per grow (bounded unavailability, in steps);
- at every end state: the mover finishes from where it stopped, the registry holds the first
  Seal of each partition, the store (replication drained) equals the spec.

`explore` searches every interleaving of a small scope exhaustively (with memoisation of states:
two interleavings that reach the same state share their futures) and returns the first
violation with the steps that led to it. Broken variants of the protocol (`Variant`) show that
the checks can fail.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Literal

from journal.core.fold import JournalState, Verdict
from journal.core.model import (
    ActionHeader,
    AppendHeader,
    DeleteHeader,
    PayloadType,
    PurgeHeader,
    SeqRange,
)

OLD, NEW = "old", "new"
MAX_RIVALS = 8  # an append at the end looks again at most this often (as ConditionalAppends)


class Variant(Enum):
    """The protocol, and broken versions of it that the model must catch."""

    CORRECT = "correct"
    # the cut is recorded in the registry only, no Seal produced into the partition: a process
    # whose view of the registry predates the cut has nothing in the log to tell it
    NO_SEAL = "skip the seal record"
    # a resumed mover records the offset of the Seal it produced itself, not the log's first
    RESUME_BLIND = "resume without the recorded state"
    # NEW's replication takes a journal's base from the store before OLD is replicated
    # through the Seal
    EARLY_BASE = "replicate NEW before OLD reached the seal"


Kind = Literal["append", "delete", "purge", "seal"]
Moved = Literal["moved"]
MOVED: Moved = "moved"  # the verdict of an action after its partition's cut: no effect, redo


@dataclass(frozen=True, slots=True)
class Rec:
    """One record of a log: an append holds seqNrs first..last; a delete, to = last."""

    kind: Kind
    journal: str = ""
    first: int = 0
    last: int = 0
    op: str = ""  # the operation that produced it: who won a seqNr

    def header(self) -> ActionHeader:
        if self.kind == "append":
            return AppendHeader(SeqRange(self.first, self.last), PayloadType.JSON)
        if self.kind == "delete":
            return DeleteHeader(self.last)
        return PurgeHeader()


Visible = tuple[int, int, tuple[tuple[int, str], ...]]  # what a read shows: seqNr, deleteTo, events


@dataclass(frozen=True, slots=True)
class JView:
    """A journal as a fold made it: the project's JournalState, plus who wrote each live
    event (so that a read shows whose append won each seqNr)."""

    state: JournalState = field(default_factory=JournalState)
    events: tuple[tuple[int, str], ...] = ()  # (seqNr, op) above deleteTo

    def apply(self, rec: Rec, offset: int) -> tuple[JView, Verdict]:
        """The project's own rule (`JournalState.apply`) on one record."""
        state, verdict = self.state.apply(rec.header(), offset)
        events = self.events
        if verdict is Verdict.APPENDED:
            events = (*events, *((s, rec.op) for s in range(rec.first, rec.last + 1)))
        elif verdict is Verdict.PURGED:
            events = ()
        return JView(state, tuple(e for e in events if e[0] > state.delete_to)), verdict

    def rebased(self) -> JView:
        """The base a journal starts from in NEW: its OLD state, before NEW's first offset."""
        return JView(JournalState(-1, self.state.seq_nr, self.state.delete_to), self.events)

    @property
    def visible(self) -> Visible:
        return (self.state.seq_nr, self.state.delete_to, self.events)


@dataclass(frozen=True, slots=True)
class Op:
    """A client's operation, served by a worker process, one step at a time."""

    name: str
    kind: Literal["append", "at_end", "delete", "purge", "read"]
    journal: str
    worker: str
    expected: int = 0  # append: the seqNr the writer expects the journal at
    count: int = 1  # events of an append
    to: int = 0  # delete
    # progress
    pc: Literal["start", "look", "produce", "verdict", "fence_old", "fence_new", "done"] = "start"
    view: Registry | None = None  # the registry as its process read it (stale as it goes)
    where: str = OLD  # where its last look found the journal
    first: int = 0  # the seqNrs this attempt got
    at: tuple[str, int, int] | None = None  # (topic, partition, offset) of its record
    spec: tuple[Verdict | Moved, Visible] | None = None  # its record's effect in the spec
    base: JView | None = None  # a read's OLD part, between its two fences
    moved: int = 0
    rivals: int = 0
    result: str = ""
    seen: frozenset[Visible] = frozenset()  # the spec's states while it was in flight

    @property
    def in_flight(self) -> bool:
        return self.pc not in ("start", "done")


@dataclass(frozen=True, slots=True)
class Scope:
    """The world searched: partitions, where each journal goes, operations, crashes."""

    old_partitions: int
    new_partitions: int
    placement: tuple[tuple[str, int], ...]  # journal -> its NEW partition (the hash's stand-in)
    ops: tuple[Op, ...]
    initial: tuple[Rec, ...] = ()  # records already in OLD, each in its journal's partition
    mover_crashes: int = 1
    worker_crashes: int = 1
    replication: bool = True  # off: reads fold the log alone (a smaller search)

    def new_of(self, journal: str) -> int:
        return dict(self.placement)[journal]

    def old_of(self, journal: str) -> int:
        # M = k * N: murmur2 % M is congruent to murmur2 % N, so NEW/q holds journals of
        # OLD/(q mod N) only
        return self.new_of(journal) % self.old_partitions


@dataclass(frozen=True, slots=True)
class Registry:
    """The grow's record in Cassandra (beside the schema version): what the mover resumes from."""

    phase: Literal["none", "planned", "created", "done"] = "none"
    low: tuple[int | None, ...] = ()  # per OLD partition: its end just before sealing
    seal: tuple[int | None, ...] = ()  # per OLD partition: the cut (its first Seal's offset)

    def cut(self, partition: int) -> int | None:
        return self.seal[partition] if self.seal else None


Log = tuple[Rec, ...]


@dataclass(frozen=True, slots=True)
class World:
    old: tuple[Log, ...]
    new: tuple[Log, ...]  # empty until the mover creates NEW
    registry: Registry
    rows: tuple[tuple[tuple[str, str], JView], ...]  # the store: (topic, journal) -> row
    pointers: tuple[tuple[tuple[str, int], int], ...]  # the store: last replicated offset
    store_seals: tuple[tuple[int, int], ...]  # the store: OLD partitions replicated to the cut
    pending: tuple[tuple[str, int], ...]  # replication: rows written, pointer not yet moved
    ops: tuple[Op, ...]
    spec: tuple[tuple[str, JView], ...]
    mover_sealed: tuple[tuple[int, int], ...] = ()  # the mover's memory: its own Seals
    mover_crashes: int = 0
    worker_crashes: int = 0

    def log(self, topic: str, partition: int) -> Log:
        return (self.old if topic == OLD else self.new)[partition]

    def row(self, topic: str, journal: str) -> JView | None:
        return dict(self.rows).get((topic, journal))

    def pointer(self, topic: str, partition: int) -> int:
        return dict(self.pointers).get((topic, partition), -1)

    def spec_of(self, journal: str) -> JView:
        return dict(self.spec).get(journal, JView())


class Violation(AssertionError):
    """An invariant broken, with the steps that led there (the counterexample)."""

    def __init__(self, what: str, trace: list[str]) -> None:
        lines = "\n".join(f"  {i + 1:2}. {step}" for i, step in enumerate(trace))
        super().__init__(f"{what}\n{lines}")
        self.what = what
        self.trace = trace


class _Broken(Exception):
    pass


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise _Broken(what)


def _put(items: tuple[tuple[object, object], ...], key: object, value: object) -> tuple:  # type: ignore[type-arg]
    return tuple(sorted({**dict(items), key: value}.items(), key=repr))


# --- the log and the spec ----------------------------------------------------------------


def _produce(world: World, topic: str, partition: int, rec: Rec) -> tuple[World, int]:
    logs = list(world.old if topic == OLD else world.new)
    logs[partition] = (*logs[partition], rec)
    if topic == OLD:
        return replace(world, old=tuple(logs)), len(logs[partition]) - 1
    return replace(world, new=tuple(logs)), len(logs[partition]) - 1


def _first_seal(log: Log, start: int = 0) -> int | None:
    return next((o for o in range(start, len(log)) if log[o].kind == "seal"), None)


def _truly_cut(world: World, partition: int) -> bool:
    """The spec's notion: the partition is cut once a Seal is in it or the registry says so."""
    log = world.old[partition]
    return _first_seal(log) is not None or world.registry.cut(partition) is not None


# --- the reading flow: what every process computes ---------------------------------------


def _cut(world: World, variant: Variant, partition: int, view: Registry) -> int | None:
    """Where OLD/partition ends for a process whose registry view is `view`: the registry's
    cut, the store's (replication passed it), else the first Seal its index sees in the log."""
    cut = view.cut(partition)
    if cut is None:
        cut = dict(world.store_seals).get(partition)
    if cut is None and variant is not Variant.NO_SEAL:
        cut = _first_seal(world.old[partition])
    return cut


def _read_old(
    world: World, scope: Scope, variant: Variant, journal: str, view: Registry
) -> tuple[JView, bool]:
    """The journal in OLD: its store row plus OLD's records above the pointer, up to the fence
    (the log's end now) or the cut; and whether the partition is cut."""
    p = scope.old_of(journal)
    log = world.old[p]
    cut = _cut(world, variant, p, view)
    end = len(log) if cut is None else min(len(log), cut)
    state = world.row(OLD, journal) or JView()
    for offset in range(world.pointer(OLD, p) + 1, end):
        if log[offset].journal == journal:
            state = state.apply(log[offset], offset)[0]
    return state, cut is not None


def _read_new(world: World, scope: Scope, journal: str, base: JView) -> JView:
    """The journal in NEW: its NEW row (which holds the base) or else the base, plus NEW's
    records above the pointer, up to the fence (the log's end now)."""
    q = scope.new_of(journal)
    log = world.new[q]
    state = world.row(NEW, journal) or base.rebased()
    for offset in range(world.pointer(NEW, q) + 1, len(log)):
        if log[offset].journal == journal:
            state = state.apply(log[offset], offset)[0]
    return state


def _look(
    world: World, scope: Scope, variant: Variant, journal: str, view: Registry
) -> tuple[JView, str]:
    state, cut = _read_old(world, scope, variant, journal, view)
    return (state, OLD) if not cut else (_read_new(world, scope, journal, state), NEW)


def _fold_to(
    world: World, variant: Variant, view: Registry, at: tuple[str, int, int], scope: Scope
) -> tuple[Verdict | Moved, JView]:
    """The verdict of the record at `at`: the fold of the log alone up to it (the base of a
    NEW journal: OLD's log up to the cut)."""
    topic, partition, offset = at
    journal = world.log(topic, partition)[offset].journal
    p = scope.old_of(journal)
    cut = _cut(world, variant, p, view)
    if topic == OLD and cut is not None and offset >= cut:
        return MOVED, JView()
    state = JView()
    old_end = offset + 1 if topic == OLD else cut
    assert old_end is not None  # a record in NEW is produced only once OLD/p is cut
    verdict = Verdict.NOTHING
    for o in range(min(old_end, len(world.old[p]))):
        if world.old[p][o].journal == journal:
            state, verdict = state.apply(world.old[p][o], o)
    if topic == NEW:
        state = state.rebased()
        for o in range(offset + 1):
            if world.new[partition][o].journal == journal:
                state, verdict = state.apply(world.new[partition][o], o)
    return verdict, state


# --- the writers and readers -------------------------------------------------------------


def _op_step(world: World, scope: Scope, variant: Variant, i: int) -> tuple[str, World]:
    op = world.ops[i]
    j = op.journal
    if op.pc == "start":  # invoked now: its process reads the registry (then keeps that view)
        op = replace(
            op,
            pc="fence_old" if op.kind == "read" else "look",
            view=world.registry,
            seen=frozenset({world.spec_of(j).visible}),
        )
    view = op.view
    assert view is not None
    label = f"{op.name} ({op.worker}) {op.pc}"

    if op.pc == "fence_old":  # a read: the fence of OLD, its index, the fold
        base, cut = _read_old(world, scope, variant, j, view)
        if cut:
            op = replace(op, pc="fence_new", base=base)
        else:
            op = _answer_read(op, base.visible)
            label += f" -> {op.result}"
    elif op.pc == "fence_new":  # a read of a moved journal: NEW's fence, taken after OLD's
        assert op.base is not None
        op = _answer_read(op, _read_new(world, scope, j, op.base).visible)
        label += f" -> {op.result}"
    elif op.pc == "look":  # a writer looks at the journal: where it is, at which seqNr
        state, where = _look(world, scope, variant, j, view)
        _check(
            state.visible in op.seen, f"{op.name}'s look saw {state.visible}, a state never held"
        )
        seq_nr = state.state.seq_nr
        label += f" -> {where}, seqNr {seq_nr}"
        if op.kind == "append" and seq_nr != op.expected:
            op = replace(op, pc="done", result=f"409 at {seq_nr}")
        else:
            op = replace(
                op,
                pc="produce",
                where=where,
                first=op.expected + 1 if op.kind == "append" else seq_nr + 1,
            )
    elif op.pc == "produce":
        rec = _record_of(op)
        partition = scope.old_of(j) if op.where == OLD else scope.new_of(j)
        effect: Verdict | Moved = MOVED
        spec = world.spec_of(j)
        if not (op.where == OLD and _truly_cut(world, partition)):
            spec, effect = spec.apply(rec, spec.state.offset + 1)
        world, offset = _produce(world, op.where, partition, rec)
        world = replace(world, spec=_put(world.spec, j, spec))
        op = replace(
            op, pc="verdict", at=(op.where, partition, offset), spec=(effect, spec.visible)
        )
        label += f" {_show(rec)} -> {op.where}/{partition}@{offset}"
    elif op.pc == "verdict":
        op, said = _take_verdict(world, scope, variant, op)
        label += f" -> {said}"
    world = replace(world, ops=(*world.ops[:i], op, *world.ops[i + 1 :]))
    return label, world


def _record_of(op: Op) -> Rec:
    if op.kind in ("append", "at_end"):
        return Rec("append", op.journal, op.first, op.first + op.count - 1, op.name)
    if op.kind == "delete":
        return Rec("delete", op.journal, 0, op.to, op.name)
    return Rec("purge", op.journal, op=op.name)


def _show(rec: Rec) -> str:
    if rec.kind == "append":
        return f"Append({rec.journal} {rec.first}..{rec.last})"
    if rec.kind == "delete":
        return f"Delete({rec.journal} to {rec.last})"
    return f"{rec.kind.capitalize()}({rec.journal})"


def _answer_read(op: Op, visible: Visible) -> Op:
    _check(visible in op.seen, f"{op.name} read {visible}; the journal held only {sorted(op.seen)}")
    return replace(op, pc="done", result=f"read {visible}")


def _take_verdict(world: World, scope: Scope, variant: Variant, op: Op) -> tuple[Op, str]:
    """The fold's verdict of the op's record, compared with what the spec says it did."""
    assert op.at is not None and op.view is not None and op.spec is not None
    verdict, state = _fold_to(world, variant, op.view, op.at, scope)
    effect, spec_after = op.spec
    if verdict == MOVED:
        _check(
            effect == MOVED, f"{op.name}: moved, yet its record took effect: it would be done twice"
        )
        _check(op.moved == 0, f"{op.name} moved twice: not bounded")
        # the verdict tells the process: its next look reads the registry and the log afresh
        return replace(op, pc="look", moved=1, view=world.registry), "MOVED: redo in NEW"
    _check(effect != MOVED, f"{op.name} answered {verdict.value} for a record after the cut")
    if op.kind in ("append", "at_end"):
        accepted = verdict is Verdict.APPENDED
        _check(
            accepted == (effect is Verdict.APPENDED),
            f"{op.name}: fold says {verdict.value}, spec {effect}",
        )
        if accepted:
            return replace(
                op, pc="done", result=f"200 {op.first}..{op.first + op.count - 1}"
            ), "200"
        if op.kind == "at_end" and op.rivals < MAX_RIVALS:
            return replace(op, pc="look", rivals=op.rivals + 1), "a rival won: look again"
        return replace(op, pc="done", result="409"), "409"
    # a delete answers deleteTo at its record; a purge, an empty journal
    _check(
        state.visible[:2] == spec_after[:2],
        f"{op.name} answered {state.visible[:2]}, spec {spec_after[:2]}",
    )
    return replace(op, pc="done", result=f"200 deleteTo {state.state.delete_to}"), "200"


# --- the mover (the command), replication, kill -9 ---------------------------------------


def _mover_step(world: World, variant: Variant, scope: Scope) -> tuple[str, World] | None:
    """The command's next step, decided from the registry and the log alone (plus, in the
    broken variant, its own memory)."""
    reg = world.registry
    n = scope.old_partitions
    if reg.phase == "none":
        return "mover: record the plan", replace(
            world, registry=Registry("planned", (None,) * n, (None,) * n)
        )
    if reg.phase == "planned":
        if not world.new:  # create-if-absent (a real one also checks the count is M)
            return "mover: create NEW", replace(world, new=((),) * scope.new_partitions)
        return "mover: record NEW created", replace(world, registry=replace(reg, phase="created"))
    if reg.phase == "done":
        return None
    p = next((p for p in range(n) if reg.seal[p] is None), None)
    if p is None:
        return "mover: record done", replace(world, registry=replace(reg, phase="done"))
    if reg.low[p] is None:
        low = _put_at(reg.low, p, len(world.old[p]))
        return f"mover: record OLD/{p} ends at {len(world.old[p])}", replace(
            world, registry=replace(reg, low=low)
        )
    mine = dict(world.mover_sealed)
    if variant is Variant.NO_SEAL:
        cut = _put_at(reg.seal, p, len(world.old[p]))  # a cut at no record: the next offset
        return f"mover: record the cut of OLD/{p} (no Seal)", replace(
            world, registry=replace(reg, seal=cut)
        )
    if p not in mine:
        world, offset = _produce(world, OLD, p, Rec("seal"))
        sealed = _put(world.mover_sealed, p, offset)
        return f"mover: Seal -> OLD/{p}@{offset}", replace(world, mover_sealed=sealed)
    ended = reg.low[p]
    assert ended is not None
    first = _first_seal(world.old[p], ended)  # the log's first Seal, found from the record
    cut_at = mine[p] if variant is Variant.RESUME_BLIND else first
    cut = _put_at(reg.seal, p, cut_at)
    return f"mover: record OLD/{p} cut at {cut_at}", replace(world, registry=replace(reg, seal=cut))


def _put_at(items: tuple[int | None, ...], i: int, value: int | None) -> tuple[int | None, ...]:
    return (*items[:i], value, *items[i + 1 :])


def _replication_steps(world: World, scope: Scope, variant: Variant) -> Iterator[tuple[str, World]]:
    """Replication (worker w1's agents): per partition, write the rows of the next record,
    then move the pointer; a kill -9 between the two replays the record (harmless)."""
    partitions = [(OLD, p) for p in range(len(world.old))] + [
        (NEW, q) for q in range(len(world.new))
    ]
    for topic, p in partitions:
        log = world.log(topic, p)
        at = world.pointer(topic, p) + 1
        if (topic, p) in world.pending:
            pointers = _put(world.pointers, (topic, p), at)
            seals = world.store_seals
            cut = _cut(world, variant, p, world.registry) if topic == OLD else None
            # (NO_SEAL's cut is the offset after its partition's last kept record)
            if cut is not None and at >= cut - (
                variant is Variant.NO_SEAL
            ):  # the pointer row says: replicated to the cut
                seals = _put(seals, p, cut)
            pending = tuple(x for x in world.pending if x != (topic, p))
            yield (
                f"replication: {topic}/{p} pointer -> {at}",
                replace(world, pointers=pointers, store_seals=seals, pending=pending),
            )
            continue
        if at >= len(log):
            continue
        rec = log[at]
        rows = world.rows
        if rec.kind != "seal" and topic == OLD:
            cut = _cut(world, variant, p, world.registry)
            if cut is None or at < cut:
                row = world.row(OLD, rec.journal) or JView()
                rows = _put(rows, (OLD, rec.journal), row.apply(rec, at)[0])
        elif topic == NEW:
            new_row = world.row(NEW, rec.journal)
            if new_row is None:
                old_p = scope.old_of(rec.journal)
                if variant is not Variant.EARLY_BASE and old_p not in dict(world.store_seals):
                    continue  # the base is not in the store yet: wait for OLD's replication
                new_row = (world.row(OLD, rec.journal) or JView()).rebased()
            rows = _put(rows, (NEW, rec.journal), new_row.apply(rec, at)[0])
        pending = (*world.pending, (topic, p))
        yield f"replication: {topic}/{p}@{at} rows", replace(world, rows=rows, pending=pending)


def _crashes(world: World, scope: Scope) -> Iterator[tuple[str, World]]:
    if world.mover_crashes < scope.mover_crashes and world.registry.phase != "done":
        yield (
            "KILL -9 the mover (it restarts with no memory)",
            replace(world, mover_sealed=(), mover_crashes=world.mover_crashes + 1),
        )
    if world.worker_crashes < scope.worker_crashes:
        for worker in sorted({op.worker for op in world.ops}):
            if any(op.in_flight and op.worker == worker for op in world.ops) or (
                worker == "w1" and world.pending
            ):
                ops = tuple(
                    replace(op, pc="done", result="503 outcome unknown")
                    if op.in_flight and op.worker == worker
                    else op
                    for op in world.ops
                )
                pending = () if worker == "w1" else world.pending
                yield (
                    f"KILL -9 worker {worker}",
                    replace(
                        world, ops=ops, pending=pending, worker_crashes=world.worker_crashes + 1
                    ),
                )


# --- the search --------------------------------------------------------------------------


def start(scope: Scope) -> World:
    """OLD holds `scope.initial`, nothing replicated yet; no grow begun."""
    old: list[Log] = [() for _ in range(scope.old_partitions)]
    spec: dict[str, JView] = {}
    for rec in scope.initial:
        p = scope.old_of(rec.journal)
        old[p] = (*old[p], rec)
        view = spec.get(rec.journal, JView())
        spec[rec.journal] = view.apply(rec, view.state.offset + 1)[0]
    return World(
        old=tuple(old),
        new=(),
        registry=Registry(),
        rows=(),
        pointers=(),
        store_seals=(),
        pending=(),
        ops=scope.ops,
        spec=tuple(sorted(spec.items())),
    )


@dataclass(slots=True)
class Stats:
    """What a search explored."""

    states: int = 0  # distinct states reached
    interleavings: int = 0  # distinct complete runs (paths from the start to an end state)
    crash_points: int = 0  # kill -9 transitions explored (distinct state, victim)
    end_states: int = 0


def transitions(world: World, scope: Scope, variant: Variant) -> Iterator[tuple[str, World, bool]]:
    """Every step any actor can take now: (what, the world after, whether it is a kill -9)."""
    for i, op in enumerate(world.ops):
        if op.pc != "done":
            label, after = _op_step(world, scope, variant, i)
            yield label, _observe(after), False
    if world.registry.phase != "done":
        step = _mover_step(world, variant, scope)
        if step is not None:
            yield step[0], _observe(step[1]), False
    if scope.replication:
        for label, after in _replication_steps(world, scope, variant):
            yield label, _observe(after), False
    for label, after in _crashes(world, scope):
        yield label, after, True


def _observe(world: World) -> World:
    """Each operation in flight notes the spec's state of its journal: a linearizable answer
    is one of these."""
    ops = tuple(
        replace(op, seen=op.seen | {world.spec_of(op.journal).visible}) if op.in_flight else op
        for op in world.ops
    )
    return replace(world, ops=ops)


def check_end(world: World, scope: Scope, variant: Variant) -> None:
    """Nothing more to do: the move finished, replication drained; every journal reads as the
    spec, from the store as from the log, and the registry holds the log's first Seals."""
    _check(world.registry.phase == "done", "the move did not finish")
    for journal, spec in world.spec:
        state, where = _look(world, scope, variant, journal, world.registry)
        _check(where == NEW, f"{journal} still in OLD after the move")
        _check(
            state.visible == spec.visible,
            f"{journal} reads {state.visible} at the end, spec {spec.visible}",
        )
        if scope.replication:  # replication drained: the store holds the spec
            row = world.row(NEW, journal) or world.row(OLD, journal) or JView()
            stored = row.visible
            _check(
                stored == spec.visible,
                f"the store holds {stored} for {journal}, not {spec.visible}",
            )
    for p, log in enumerate(world.old):
        seals = sum(rec.kind == "seal" for rec in log)
        _check(seals <= 1 + world.mover_crashes, f"OLD/{p} got {seals} Seals: the mover loops")
    if variant is not Variant.NO_SEAL:
        for p, log in enumerate(world.old):
            _check(
                world.registry.seal[p] == _first_seal(log),
                f"registry cut of OLD/{p} is not its first Seal",
            )


def explore(scope: Scope, variant: Variant = Variant.CORRECT) -> Stats:
    """Every interleaving of the scope's actors, with kill -9 at every point allowed; raises
    Violation with the shortest-found trace of the first broken invariant."""
    stats = Stats()
    paths: dict[World, int] = {}
    trace: list[str] = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))

    def visit(world: World) -> int:
        known = paths.get(world)
        if known is not None:
            return known
        stats.states += 1
        total = 0
        try:
            steps = list(transitions(world, scope, variant))
        except _Broken as broken:
            raise Violation(str(broken), list(trace)) from None
        for label, after, crash in steps:
            trace.append(label)
            try:
                stats.crash_points += crash
                total += visit(after)
            finally:
                trace.pop()
        if not any(not crash for _, _, crash in steps):
            try:
                check_end(world, scope, variant)
            except _Broken as broken:
                raise Violation(str(broken), list(trace)) from None
            stats.end_states += 1
            total += 1
        paths[world] = total
        return total

    try:
        stats.interleavings = visit(start(scope))
    finally:
        sys.setrecursionlimit(limit)
    return stats
