"""A journal's snapshots: `journals.journal(id).snapshots.put / latest / delete`.

A snapshot is the caller's encoding of a journal's state up to a seqNr, kept in the store
(in chunks: it may be far larger than a Kafka record). The log decides which ones count:

- `put` produces a Mark to the journal's partition and reads the journal as of it (the
  reading flow, so an unreplicated Purge or append is seen); the snapshot is refused if its
  seqNr is beyond the journal's, else stored with that Mark's offset.
- A snapshot counts only if no Purge of the journal follows its Mark in the log. Replication,
  applying a Purge, removes the journal's snapshots whose Marks precede it (the store stamps
  them with their offsets, so a put that saw the journal before the Purge but is written after
  replication applied it stays shadowed); a Purge not replicated yet is in the journal's head,
  whose last Purge `latest` passes to the store as the earliest Mark it may answer. So after a
  Purge the journal starts again at seqNr 1 with no snapshot, and an old one never comes back.
- `latest(n)` answers as of its fence: the newest snapshot at or below n whose Mark lies
  after the head's last Purge and below the fence. A put that was acknowledged is below it.
- `delete(to)` produces a Mark too and removes the snapshots at or below `to` put before it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from journal.client.reading import ReadingFlow
from journal.core.model import SEQ_NR_MAX, JournalKey, Payload, Position, check_seq_nr
from journal.errors import SnapshotBeyondJournal, SnapshotTooLarge
from journal.store.base import Snapshot, SnapshotStore, snapshot_bytes


class JournalSnapshots:
    """One journal's snapshots. Cheap to create; every method is one round trip of its kind.

    Its client's reading flow (its store, fence and partitioner too), and `mark`, which
    produces a Mark with the given id to the journal's partition."""

    def __init__(
        self,
        key: JournalKey,
        reading: ReadingFlow,
        mark: Callable[[JournalKey, str], Awaitable[Position]],
    ) -> None:
        self.key = key
        self._reading = reading
        self._produce_mark = mark

    def _store(self) -> SnapshotStore:
        store = self._reading.store
        if not isinstance(store, SnapshotStore):
            raise TypeError(f"{type(store).__name__} keeps no snapshots")
        return store

    async def put(self, seq_nr: int, payload: Payload) -> Snapshot:
        """Store a snapshot of the journal up to `seq_nr`, replacing an earlier one there.

        SnapshotTooLarge past the store's limit, SnapshotBeyondJournal if the journal's last
        seqNr is below `seq_nr` (both before anything is written).
        """
        check_seq_nr(seq_nr)
        store = self._store()
        size = len(snapshot_bytes(payload)[1])
        if size > store.max_snapshot_bytes:
            raise SnapshotTooLarge(
                f"the snapshot's payload is {size} bytes; the limit is {store.max_snapshot_bytes}"
            )
        mark = await self._mark()
        last = (await self._reading.head(self.key, until=mark.offset)).state.seq_nr
        if seq_nr > last:
            raise SnapshotBeyondJournal(seq_nr, last)
        now = datetime.now(UTC)
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # what the store keeps
        snapshot = Snapshot(seq_nr, payload, now, mark.offset)
        await store.put_snapshot(self.key, snapshot)
        return snapshot

    async def latest(self, max_seq_nr: int = SEQ_NR_MAX) -> Snapshot | None:
        """The newest snapshot at or below min(`max_seq_nr`, the journal's last seqNr)."""
        check_seq_nr(max_seq_nr, "maxSeqNr")
        store = self._store()
        reading = self._reading
        fence = await reading.fence.fence(self.key, reading.partition_of(self.key))
        # asked with the journal's view, not after it: it only lacks the head's last Purge
        guess = asyncio.ensure_future(store.latest_snapshot(self.key, max_seq_nr, -1, fence))
        try:
            head = await reading.head(self.key, until=fence)
        except BaseException:
            guess.cancel()
            await asyncio.gather(guess, return_exceptions=True)
            raise
        after = -1 if head.purge_offset is None else head.purge_offset
        limit = min(max_seq_nr, head.state.seq_nr)
        found = await guess
        if found is None or limit < 1:
            return None  # none even without the head's bounds
        if found.mark > after and found.seq_nr <= limit:
            return found
        return await store.latest_snapshot(self.key, limit, after, fence)

    async def delete(self, to: int) -> Position:
        """Remove the snapshots at or below `to`; where the Mark that orders it landed."""
        check_seq_nr(to, "to")
        store = self._store()
        mark = await self._mark()
        await store.delete_snapshots(self.key, to, mark.offset)
        return mark

    async def _mark(self) -> Position:
        return await self._produce_mark(self.key, uuid.uuid4().hex)
