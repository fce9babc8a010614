"""The one fold: a journal's actions, in log order, to the journal's state. The log decides.

Everything that interprets Append, Delete, Purge and Mark goes through `JournalState.apply`:
replication (the agents and the Spark rebuild, through `fold_batch`), the reading flow (the
store's state plus the journal's unreplicated actions, `journal.kafka.head.fold_head`) and the
audit. So a read is a function of the log alone: the same before and after replication, on
any worker.

The rules, applied per journal in offset order:
- **Conflict rule:** an Append takes effect only if its first seqNr continues the journal
  (last seqNr + 1; 1 for a new or purged journal). Any other Append is rejected: invisible to
  reads, never replicated, counted. One that ends exactly at the journal's last seqNr is most
  likely a retry of the last accepted Append and is counted as a duplicate instead. So the
  first writer in the log wins.
- **Delete(to):** deleteTo becomes max(deleteTo, min(to, last seqNr)): it covers events
  appended before it, never later ones, and only grows.
- **Purge:** the journal starts again, empty; a later Append starts at 1.
- **Mark:** nothing (a read's fence with `read_fence=mark`; a snapshot's stamp).
- **Moved:** every action after its partition's cut (the offset of the partition's first
  Seal, journal/core/grow.py) is rejected with the verdict MOVED: it never takes effect, its
  writer redoes it in the grown topic (docs/growing.md). The caller passes the cut it knows
  (`apply`'s `cut`, `fold_batch`'s `cuts`); a Seal in a batch is a cut from then on.
An action at or below the state's `offset` was folded already and changes nothing, which is
what makes replaying records (after a crash, a replayed batch, a rebuild) harmless.

`offset` moves only when the state changes, so a state does not depend on how the log was
cut into batches: the agents and a Spark rebuild store the very same rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from journal.core.grow import SEAL_ID
from journal.core.model import (
    ActionHeader,
    ActionRecord,
    AppendHeader,
    DeleteHeader,
    JournalKey,
    PurgeHeader,
)
from journal.metrics import METRICS

log = logging.getLogger(__name__)


class Verdict(Enum):
    """What one action did to a journal."""

    APPENDED = "appended"
    DELETED = "deleted"
    PURGED = "purged"
    NOTHING = "nothing"  # a Mark, a Delete that removes nothing new, or folded already
    DUPLICATE = "duplicate"  # an Append ending at the journal's last seqNr: a retry
    CONFLICT = "conflict"  # an Append that does not continue the journal
    MOVED = "moved"  # any action after its partition's cut: redone in the grown topic

    @property
    def rejected(self) -> bool:
        return self in (Verdict.DUPLICATE, Verdict.CONFLICT, Verdict.MOVED)


@dataclass(frozen=True, slots=True)
class JournalState:
    """A journal as the log made it, up to `offset` (the last action that changed it).

    `seq_nr` is the last accepted seqNr and `delete_to` the highest deleted one, 0 for none.
    """

    offset: int = -1
    seq_nr: int = 0
    delete_to: int = 0

    @property
    def exists(self) -> bool:
        """Whether the journal is known: an Append was accepted since its last Purge (a
        journal deleted up to its last seqNr still exists; a purged or never appended one,
        one whose Appends were all rejected included, does not). Journal id listings follow
        this."""
        return self.seq_nr > 0

    def apply(
        self, header: ActionHeader, offset: int, cut: int | None = None
    ) -> tuple[JournalState, Verdict]:
        """The state after the action `header` at `offset`; `cut`: the offset of the first
        Seal of the partition, when the caller knows one (an action after it is MOVED)."""
        if offset <= self.offset:
            return self, Verdict.NOTHING
        if cut is not None and offset > cut:
            return self, Verdict.MOVED
        if isinstance(header, AppendHeader):
            first, last = header.range.from_, header.range.to
            if first == self.seq_nr + 1:
                return JournalState(offset, last, self.delete_to), Verdict.APPENDED
            return self, Verdict.DUPLICATE if last == self.seq_nr else Verdict.CONFLICT
        if isinstance(header, DeleteHeader):
            delete_to = min(header.to, self.seq_nr)
            if delete_to <= self.delete_to:
                return self, Verdict.NOTHING
            return JournalState(offset, self.seq_nr, delete_to), Verdict.DELETED
        if isinstance(header, PurgeHeader):
            return JournalState(offset), Verdict.PURGED
        return self, Verdict.NOTHING


def rebased(state: JournalState) -> JournalState:
    """A journal's base in a grown topic's successor (docs/growing.md): its state in the old
    topic, before the successor's first offset."""
    return JournalState(-1, state.seq_nr, state.delete_to)


def count_rejected(key: JournalKey, record: ActionRecord, verdict: Verdict) -> None:
    """Count a rejected Append; log conflicts (a writer lost a race), not retries."""
    METRICS.counter("kafka_journal_appends_rejected_total", reason=verdict.value).inc()
    if verdict is Verdict.CONFLICT:
        log.info(
            "%s: the Append of %s at offset %s does not continue the journal: rejected",
            key,
            record.header.range if isinstance(record.header, AppendHeader) else "?",
            record.offset,
        )


@dataclass(frozen=True, slots=True)
class DeleteTo:
    """A Delete as the store applies it: events at or below `to`, decided at `offset`."""

    to: int
    offset: int


@dataclass(frozen=True, slots=True)
class Removal:
    """The stored Appends a write removes wholly (their `appends` rows go): those of the stored
    events `first`..`last` (a journal's stored events above its deleteTo have no holes), but
    for the Append of the event at `last` if `spares_last` (a Delete inside that Append: it
    keeps the events above). Removed as of `offset`, the Delete's or Purge's: its rows'
    deletions are stamped `offset + 1`, above every removed Append's own stamp and below
    every later Append's (other rows: an `appends` row is keyed by its Append's offset)."""

    first: int
    last: int
    spares_last: bool
    offset: int


@dataclass(frozen=True, slots=True)
class JournalWrite:
    """What one replication batch changes in one journal: from `before` to `after`.

    Applied in this order: `purge` (the offset of the batch's last Purge: every event stored
    before it goes), `appends` (accepted, after that Purge, not wholly deleted), `delete`.
    """

    key: JournalKey
    partition: int
    before: JournalState
    after: JournalState
    purge: int | None = None
    appends: tuple[ActionRecord, ...] = ()
    delete: DeleteTo | None = None

    @property
    def changes_store(self) -> bool:
        return self.after != self.before

    @property
    def removal(self) -> Removal | None:
        """The Appends stored before this batch that it removes wholly, if any: a Purge, all
        of them above the stored deleteTo (those at or below it went with the Delete that
        deleted them); else a Delete, those up to its deleteTo, sparing the Append that
        holds deleteTo + 1 if that one was stored. The batch's own Appends are not among
        them: those wholly removed within it are never written (`appends`)."""
        before = self.before
        if before.seq_nr <= before.delete_to:
            return None  # nothing stored above the deleteTo
        first = before.delete_to + 1
        if self.purge is not None:
            return Removal(first, before.seq_nr, False, self.purge)
        if self.delete is None:
            return None
        if self.delete.to >= before.seq_nr:
            return Removal(first, before.seq_nr, False, self.delete.offset)
        return Removal(first, self.delete.to + 1, True, self.delete.offset)


def removed_in_older(
    write: JournalWrite, older: JournalKey, row: JournalState, partition: int, cut: int
) -> JournalWrite | None:
    """What `write`, a grown topic's batch of a journal a grow moved (docs/growing.md), removes
    from the journal's row `row` in an older topic of its chain (its partition `partition` there,
    cut at `cut`): its events up to the Delete's deleteTo, or all of them after a Purge, as a
    Delete or Purge at the cut. Stamped `cut + 1`, it shadows every write of that topic's own
    (its offsets are at most the cut) and is the same on every replay. The row itself is left
    as the older topic's log made it. None: nothing there to remove."""
    if write.purge is not None:
        if row.seq_nr <= row.delete_to:
            return None
        return JournalWrite(older, partition, row, JournalState(cut), purge=cut)
    if write.delete is None:
        return None
    to = min(write.delete.to, row.seq_nr)
    if to <= row.delete_to:
        return None
    after = JournalState(cut, row.seq_nr, to)
    return JournalWrite(older, partition, row, after, delete=DeleteTo(to, cut))


@dataclass(slots=True)
class _Folding:
    """One journal's batch being folded."""

    partition: int
    before: JournalState
    state: JournalState
    purge: int | None = None
    appends: list[ActionRecord] = field(default_factory=list)
    delete: DeleteTo | None = None

    def add(self, record: ActionRecord, cut: int | None) -> None:
        self.state, verdict = self.state.apply(record.header, record.offset, cut)
        if verdict is Verdict.APPENDED:
            self.appends.append(record)
        elif verdict is Verdict.DELETED:
            self.delete = DeleteTo(self.state.delete_to, record.offset)
        elif verdict is Verdict.PURGED:
            self.purge, self.appends, self.delete = record.offset, [], None
        elif verdict.rejected:
            count_rejected(record.key, record, verdict)

    def write(self, key: JournalKey) -> JournalWrite:
        delete_to = self.state.delete_to
        appends = tuple(a for a in self.appends if _last_seq_nr(a) > delete_to)
        return JournalWrite(
            key, self.partition, self.before, self.state, self.purge, appends, self.delete
        )


def _last_seq_nr(record: ActionRecord) -> int:
    assert isinstance(record.header, AppendHeader)
    return record.header.range.to


def first_seal(batch: Iterable[ActionRecord]) -> int | None:
    """The offset of the batch's first Seal (a cut, if its partition had none before)."""
    return next((r.offset for r in batch if r.key.id == SEAL_ID), None)


def fold_batch(
    batch: Iterable[ActionRecord],
    stored: Mapping[JournalKey, JournalState],
    cut: int | None = None,
) -> list[JournalWrite]:
    """Fold a batch of one partition, in offset order, onto the journals' stored states.

    `stored` holds the state the store has of every journal in the batch (missing: a new
    one). `cut`: the partition's cut, if known before the batch; else the batch's first Seal
    is the cut from there on. One write per journal, in the order of the journals' first
    records in the batch. The Seals themselves are no journal's: they write nothing.
    """
    folding: dict[JournalKey, _Folding] = {}
    for record in batch:
        if record.key.id == SEAL_ID:
            cut = record.offset if cut is None else cut
            continue
        entry = folding.get(record.key)
        if entry is None:
            before = stored.get(record.key, JournalState())
            entry = folding[record.key] = _Folding(record.partition, before, before)
        entry.add(record, cut)
    return [entry.write(key) for key, entry in folding.items()]
