"""Snapshots: the library's snapshot recorder on the journals' snapshot store.

An aggregate's snapshot at version v is its journal's snapshot (`journals.journal(id)
.snapshots`, journal/client/snapshots.py) at the seqNr v maps to (`wire.seq_nr_of`, the mapping of
its events), its payload the library's stored event (`wire.encode_snapshot`). So the log
orders the puts by their Marks and a Purge of the journal removes the aggregate's snapshots.

- **Insert** puts each snapshot in turn (no atomicity across several; the library puts one
  at a time). A version already taken is replaced, not refused: a snapshot at v is a function
  of the aggregate's events up to v, so two puts there carry the same state (two processes
  snapshotting the same event), and a refusal would need a look before the put that a rival
  could still race. A version beyond the aggregate's recorded events, or before its first,
  is the library's IntegrityError; a payload past the store's limit its DataError.
- **Select** walks down with `latest`: the newest at or below `lte`, then the newest below
  that, ... while above `gt`, up to `limit` when `desc`. The library's own call (the latest
  at or below a version: desc, limit 1) is one `latest`; every other pattern (ascending, no
  limit: `app.snapshots.get(id)`) is answered correctly at one `latest` per snapshot in the
  range, each as of its own fence.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from eventsourcing.persistence import DataError, IntegrityError, StoredEvent

from eventsourcing_kafka_journal.bases import Bases
from eventsourcing_kafka_journal.wire import (
    decode_snapshot,
    encode_snapshot,
    journal_id_of,
    seq_nr_of,
)
from journal import SEQ_NR_MAX, Journals
from journal.errors import SnapshotBeyondJournal, SnapshotTooLarge


class AggregateSnapshots:
    """The snapshot recorder's inserts and selects, on the connection's loop (async)."""

    def __init__(self, journals: Journals, bases: Bases) -> None:
        self._journals = journals
        self._bases = bases

    async def insert(self, snapshots: Sequence[StoredEvent]) -> None:
        for stored in snapshots:
            journal_id = journal_id_of(stored.originator_id)
            version = stored.originator_version
            base = await self._bases.read(journal_id)
            if base is None:
                raise IntegrityError(f"a snapshot of {journal_id} at {version}: it has no events")
            seq_nr = seq_nr_of(version, base)
            if seq_nr < 1:
                raise IntegrityError(
                    f"a snapshot of {journal_id} at {version}: its first version is {base}"
                )
            snapshots_of = self._journals.journal(journal_id).snapshots
            try:
                await snapshots_of.put(seq_nr, encode_snapshot(stored))
            except SnapshotBeyondJournal as error:
                raise IntegrityError(
                    f"a snapshot of {journal_id} at {version} (seqNr {seq_nr}) is beyond its "
                    f"recorded events (the journal's last seqNr is {error.seq_nr})"
                ) from error
            except SnapshotTooLarge as error:
                raise DataError(str(error)) from error

    async def select(
        self,
        originator_id: UUID | str,
        gt: int | None,
        lte: int | None,
        desc: bool,
        limit: int | None,
    ) -> list[StoredEvent]:
        journal_id = journal_id_of(originator_id)
        base = await self._bases.read(journal_id)
        if base is None or limit == 0:
            return []
        above = 0 if gt is None else max(0, seq_nr_of(gt, base))
        below = SEQ_NR_MAX if lte is None else min(SEQ_NR_MAX, seq_nr_of(lte, base))
        wanted = limit if desc else None  # ascending: the oldest come last in the walk
        snapshots_of = self._journals.journal(journal_id).snapshots
        found: list[StoredEvent] = []
        while below > above and (wanted is None or len(found) < wanted):
            snapshot = await snapshots_of.latest(below)
            if snapshot is None or snapshot.seq_nr <= above:
                break
            stored = decode_snapshot(journal_id, snapshot.payload)
            if stored is not None:  # another writer's snapshot of the journal: not ours
                found.append(stored)
            below = snapshot.seq_nr - 1
        if not desc:
            found.reverse()
        return found if limit is None else found[:limit]
