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

With a key-encryption key (`encryption`, docs/erasure.md), a snapshot's payload is sealed with
the journal's data key before it is stored (its associated data: the journal id, "snapshot"
and its seqNr, so it opens at no other journal or seqNr, nor as an event) and opened by
`latest`; once the journal's erasure began, `put` and `latest` answer JournalErased.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from journal.client.erasure import Encryption
from journal.client.reading import ReadingFlow
from journal.codec.envelope import SNAPSHOT, is_sealed, open_sealed, seal
from journal.core.model import (
    SEQ_NR_MAX,
    BinaryPayload,
    JournalKey,
    Payload,
    Position,
    check_seq_nr,
)
from journal.errors import SnapshotBeyondJournal, SnapshotTooLarge
from journal.kafka.head import JournalHead
from journal.store.base import Snapshot, SnapshotStore, snapshot_bytes


class JournalSnapshots:
    """One journal's snapshots. Cheap to create; every method is one round trip of its kind.

    Its client's reading flow (its store, fence and partitioner too), and `mark`, which
    produces a Mark with the given id to the journal's partition; its `encryption`, if any."""

    def __init__(
        self,
        key: JournalKey,
        reading: ReadingFlow,
        mark: Callable[[JournalKey, str], Awaitable[Position]],
        encryption: Encryption | None = None,
    ) -> None:
        self.key = key
        self._reading = reading
        self._produce_mark = mark
        self._encryption = encryption

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
        stored = payload
        if self._encryption is not None:  # JournalErased once its erasure began
            data_key = await self._encryption.keys.for_append(self.key)
            stored = seal(data_key.cipher, self.key.id, seq_nr, payload, SNAPSHOT)
        size = len(snapshot_bytes(stored)[1])  # the limit is the store's: of what it keeps
        if size > store.max_snapshot_bytes:
            sealed = " (sealed)" if stored is not payload else ""
            raise SnapshotTooLarge(
                f"the snapshot's payload is {size} bytes{sealed}; "
                f"the limit is {store.max_snapshot_bytes}"
            )
        mark = await self._mark()
        last = (await self._reading.head(self.key, until=mark.offset)).state.seq_nr
        if seq_nr > last:
            raise SnapshotBeyondJournal(seq_nr, last)
        now = datetime.now(UTC)
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # what the store keeps
        await store.put_snapshot(self.key, Snapshot(seq_nr, stored, now, mark.offset))
        return Snapshot(seq_nr, payload, now, mark.offset)

    async def latest(self, max_seq_nr: int = SEQ_NR_MAX) -> Snapshot | None:
        """The newest snapshot at or below min(`max_seq_nr`, the journal's last seqNr)."""
        check_seq_nr(max_seq_nr, "maxSeqNr")
        found = await self._latest(max_seq_nr)
        if self._encryption is None:
            return found
        # asked even when none is found: an erased journal answers JournalErased, not None
        data_key = await self._encryption.keys.for_read(self.key)
        if found is None or data_key is None or not is_sealed(found.payload):
            return found  # a journal without a key, or a snapshot put before it had one: plain
        assert isinstance(found.payload, BinaryPayload)  # is_sealed says so
        opened = open_sealed(data_key.cipher, self.key.id, found.seq_nr, found.payload, SNAPSHOT)
        return Snapshot(found.seq_nr, opened, found.timestamp, found.mark)

    async def _latest(self, max_seq_nr: int, until: int | None = None) -> Snapshot | None:
        """As of the fence, or of `until` (an offset of the journal's partition). A journal
        moved here by a grow with no snapshot here takes its old topic's newest, as of the cut
        and at most its base's seqNr, unless a Purge here hid it (docs/growing.md)."""
        found, head = await self._here(max_seq_nr, until)
        predecessor = self._reading.predecessor
        if found is not None or head.purge_offset is not None or predecessor is None:
            return found
        old_key = predecessor.key_of(self.key)
        cut = predecessor.cuts.known(predecessor.flow.partition_of(old_key))
        if cut is None:
            return None  # not moved: NEW holds the journal's whole history
        old = JournalSnapshots(old_key, predecessor.flow, self._produce_mark)
        return await old._latest(min(max_seq_nr, head.state.seq_nr), until=cut)

    async def _here(
        self, max_seq_nr: int, until: int | None
    ) -> tuple[Snapshot | None, JournalHead]:
        """The newest snapshot stored under this key that counts, and the journal's head."""
        store = self._store()
        reading = self._reading
        fence = (
            until
            if until is not None
            else await reading.fence.fence(self.key, reading.partition_of(self.key))
        )
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
            return None, head  # none even without the head's bounds
        if found.mark > after and found.seq_nr <= limit:
            return found, head
        return await store.latest_snapshot(self.key, limit, after, fence), head

    async def delete(self, to: int) -> Position:
        """Remove the snapshots at or below `to`; where the Mark that orders it landed. A
        journal moved here by a grow: its old topic's too, every one of which was put before
        the cut (a put whose Mark lands after it is redone here)."""
        check_seq_nr(to, "to")
        store = self._store()
        mark = await self._mark()
        await store.delete_snapshots(self.key, to, mark.offset)
        reading, key = self._reading, self.key
        while (predecessor := reading.predecessor) is not None:  # a chain of grows
            old_key = predecessor.key_of(key)
            cut = predecessor.cuts.known(predecessor.flow.partition_of(old_key))
            if cut is None:
                break
            await store.delete_snapshots(old_key, to, cut)
            reading, key = predecessor.flow, old_key
        return mark

    async def _mark(self) -> Position:
        return await self._produce_mark(self.key, uuid.uuid4().hex)
