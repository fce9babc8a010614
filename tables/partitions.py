"""Which partitions of the action topic this worker owns, and how far it got in each.

One object answers "do I own partition p" for the whole worker: it is fed by Faust's
assignment events (`assign`, `revoke`), the agent reports what it processed (`advance`) and
what the store holds (`replicated`), and the table index and forwarding ask it.

A reader that learnt its fence waits until the partition's processed offset reaches it: from
then on the tables describe the journal up to the fence, provided the reader's view of the
store reaches the partition's `floor`: records at or below it may be missing from the tables
(they were handled before a crash) but are in the store.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from journal.metrics import METRICS


@dataclass(slots=True)
class _Owned:
    processed: int = -1  # every record up to here is in the tables (-1: none yet)
    replicated: int = -1  # the store's pointer as this worker knows it
    floor: int = -1


class OwnedPartitions:
    def __init__(self) -> None:
        self._owned: dict[int, _Owned] = {}
        self._changed = asyncio.Condition()

    def assign(self, partition: int) -> None:
        self._owned.setdefault(partition, _Owned())

    async def revoke(self, partition: int) -> None:
        async with self._changed:
            self._owned.pop(partition, None)
            self._changed.notify_all()

    def partitions(self) -> list[int]:
        return sorted(self._owned)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def processed(self, partition: int) -> int:
        owned = self._owned.get(partition)
        return -1 if owned is None else owned.processed

    def replicated(self, partition: int) -> int:
        """A store pointer of `partition` known to be reached (-1: none)."""
        owned = self._owned.get(partition)
        return -1 if owned is None else owned.replicated

    def floor(self, partition: int) -> int:
        """The store pointer a reader needs before it may trust this worker's tables."""
        owned = self._owned.get(partition)
        return -1 if owned is None else owned.floor

    def set_floor(self, partition: int, offset: int) -> None:
        self._owned.setdefault(partition, _Owned()).floor = offset

    def set_replicated(self, partition: int, pointer: int) -> None:
        owned = self._owned.get(partition)
        if owned is not None and pointer > owned.replicated:
            owned.replicated = pointer

    async def advance(self, partition: int, offset: int) -> None:
        """Every record of `partition` up to `offset` is in the tables."""
        async with self._changed:
            owned = self._owned.setdefault(partition, _Owned())
            if offset > owned.processed:
                owned.processed = offset
                METRICS.gauge("journal_agent_offset", partition=str(partition)).set(offset)
                self._changed.notify_all()

    async def wait_for(self, partition: int, offset: int, timeout_s: float) -> bool:
        """True once `offset` of `partition` is processed here; False if not owned or too late."""

        def reached() -> bool:
            return partition not in self._owned or self.processed(partition) >= offset

        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(reached), timeout_s)
        except TimeoutError:
            return False
        return self.processed(partition) >= offset
