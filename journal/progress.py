"""How far a replicating process has processed each partition, and waiting for it.

A reader that produced a Mark at offset m waits until the partition's processed offset
reaches m: from then on the process's state (its head cache) covers the journal up to m,
provided the reader's view of the store reaches the partition's `floor`: records at or below
it may be missing from that state (they were handled before a crash) but are in the store.
"""

from __future__ import annotations

import asyncio


class Progress:
    """Processed offsets per partition of the partitions this process owns right now."""

    def __init__(self) -> None:
        self._offsets: dict[int, int] = {}
        self._floors: dict[int, int] = {}
        self._changed = asyncio.Condition()

    def offset(self, partition: int) -> int | None:
        return self._offsets.get(partition)

    def owns(self, partition: int) -> bool:
        return partition in self._offsets

    def floor(self, partition: int) -> int:
        """The store pointer a reader needs before it may trust this process's state."""
        return self._floors.get(partition, -1)

    def set_floor(self, partition: int, offset: int) -> None:
        self._floors[partition] = offset

    async def revoke(self, partition: int) -> None:
        async with self._changed:
            self._offsets.pop(partition, None)
            self._floors.pop(partition, None)
            self._changed.notify_all()

    async def advance(self, partition: int, offset: int) -> None:
        """Record that every record up to `offset` is handled; the partition counts as owned."""
        async with self._changed:
            if offset > self._offsets.get(partition, -1):
                self._offsets[partition] = offset
                self._changed.notify_all()

    async def wait_for(self, partition: int, offset: int, timeout_s: float) -> bool:
        """True once `offset` of `partition` is processed here; False if not owned or too late."""

        def reached() -> bool:
            return self._offsets.get(partition, -1) >= offset or partition not in self._offsets

        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(reached), timeout_s)
        except TimeoutError:
            return False
        return self._offsets.get(partition, -1) >= offset
