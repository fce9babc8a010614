"""The replication fold: one partition's batch of actions to the writes the eventual store needs.

A pure function, shared by the Faust agents and the Spark rebuild so both give the same store.
Per journal, in offset order:
- Marks carry no data and vanish (they do not even move the journal's offset);
- a Purge voids everything before it, so only the last Purge and what follows it survive;
- Deletes after that Purge collapse into one, the highest `to`;
- Appends wholly at or below that `to` are dropped (a read would hide them anyway).

Delete semantics: `deleteTo` only grows and hides every event at or below it, whenever the
event was appended. Writers clamp `to` to the journal's last seqNr, so in practice a Delete
covers exactly the events appended before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from journal.model import (
    ActionRecord,
    AppendHeader,
    DeleteHeader,
    JournalKey,
    MarkHeader,
    PurgeHeader,
)


@dataclass(frozen=True, slots=True)
class DeleteTo:
    """A Delete as the store applies it: events at or below `to`, decided at `offset`."""

    to: int
    offset: int


@dataclass(frozen=True, slots=True)
class JournalWrite:
    """What one batch changes in one journal, applied in this order: purge, appends, delete.

    `offset` is the highest offset among the journal's records in the batch, Marks excepted,
    so the store can record how far the journal has been replicated. `seq_nr` is the last
    seqNr appended after the Purge, also when a Delete made its Append unnecessary to store.
    """

    key: JournalKey
    partition: int
    offset: int
    purge: int | None = None  # offset of the last Purge of the batch
    appends: tuple[ActionRecord, ...] = ()
    delete: DeleteTo | None = None
    seq_nr: int | None = None

    @property
    def changes_store(self) -> bool:
        return self.purge is not None or self.seq_nr is not None or self.delete is not None

    def after(self, applied: int) -> JournalWrite | None:
        """This write without what a store has applied already (offsets up to `applied`).

        This is what makes replication idempotent: None when there is nothing left.
        """
        if self.offset <= applied:
            return None
        return replace(
            self,
            purge=self.purge if self.purge is not None and self.purge > applied else None,
            appends=tuple(a for a in self.appends if a.offset > applied),
            delete=self.delete
            if self.delete is not None and self.delete.offset > applied
            else None,
        )


@dataclass(slots=True)
class _Pending:
    partition: int
    offset: int = -1
    purge: int | None = None
    appends: list[ActionRecord] | None = None
    delete: DeleteTo | None = None
    seq_nr: int | None = None

    def add(self, record: ActionRecord) -> None:
        header = record.header
        if not isinstance(header, MarkHeader):
            # Marks change nothing: the journal's offset must not depend on where batches end
            self.offset = max(self.offset, record.offset)
        if isinstance(header, PurgeHeader):
            self.purge, self.appends, self.delete = record.offset, None, None
            self.seq_nr = None
        elif isinstance(header, AppendHeader):
            if self.appends is None:
                self.appends = []
            self.appends.append(record)
            self.seq_nr = header.range.to
        elif isinstance(header, DeleteHeader) and (
            self.delete is None or header.to > self.delete.to
        ):
            self.delete = DeleteTo(header.to, record.offset)

    def write(self, key: JournalKey) -> JournalWrite:
        appends = tuple(self.appends or ())
        if self.delete is not None:
            delete_to = self.delete.to
            appends = tuple(a for a in appends if _range_to(a) > delete_to)
        return JournalWrite(
            key, self.partition, self.offset, self.purge, appends, self.delete, self.seq_nr
        )


def _range_to(record: ActionRecord) -> int:
    assert isinstance(record.header, AppendHeader)
    return record.header.range.to


def fold(batch: Iterable[ActionRecord]) -> list[JournalWrite]:
    """Fold a batch of one partition, in offset order, into one write per journal it touches.

    Journals come out in the order of their first record in the batch.
    """
    pending: dict[JournalKey, _Pending] = {}
    for record in batch:
        entry = pending.get(record.key)
        if entry is None:
            entry = pending[record.key] = _Pending(record.partition)
        entry.add(record)
    return [entry.write(key) for key, entry in pending.items()]
