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

from dataclasses import dataclass, field

from journal.core import OffsetWaiters
from journal.metrics import METRICS

_OFFSET = "kafka_journal_agent_offset"


@dataclass(slots=True)
class _Owned:
    processed: int = -1  # every record up to here is in the tables (-1: none yet)
    replicated: int = -1  # the store's pointer as this worker knows it
    floor: int = -1
    # the agent publishes what it handles (`advance`): False from the assignment until its
    # first publication, and while it handles records the store must first hold the gap
    # before (`held`): then a reader waiting for it may wait for the store, not the agent
    publishing: bool = False
    waiters: OffsetWaiters = field(default_factory=OffsetWaiters)  # readers awaiting an offset


class OwnedPartitions:
    def __init__(self) -> None:
        self._owned: dict[int, _Owned] = {}

    def assign(self, partition: int) -> None:
        self._owned.setdefault(partition, _Owned())

    def revoke(self, partition: int) -> None:
        owned = self._owned.pop(partition, None)
        METRICS.remove(_OFFSET, partition=str(partition))  # its new owner reports it
        if owned is not None:
            owned.waiters.miss_all()

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
        owned = self._owned.get(partition)
        if owned is not None:  # else revoked meanwhile: ownership comes from `assign` only
            owned.floor = offset

    def raise_floor(self, partition: int, offset: int) -> None:
        """Records up to `offset` may be missing from the tables now (pruned): a reader needs
        the store that far."""
        owned = self._owned.get(partition)
        if owned is not None and offset > owned.floor:
            owned.floor = offset

    def set_replicated(self, partition: int, pointer: int) -> None:
        owned = self._owned.get(partition)
        if owned is not None and pointer > owned.replicated:
            owned.replicated = pointer

    def publishing(self, partition: int) -> bool:
        """Whether the agent publishes what it handles in `partition` (see `_Owned`): if so, a
        reader it is behind waits for the agent alone."""
        owned = self._owned.get(partition)
        return owned is not None and owned.publishing

    def held(self, partition: int) -> None:
        """The agent handled a record it may not publish yet (the store lacks the gap)."""
        owned = self._owned.get(partition)
        if owned is not None:
            owned.publishing = False

    def advance(self, partition: int, offset: int) -> None:
        """Every record of `partition` up to `offset` is in the tables."""
        owned = self._owned.get(partition)
        if owned is None:
            return
        owned.publishing = True
        if offset <= owned.processed:
            return
        owned.processed = offset
        METRICS.gauge(_OFFSET, partition=str(partition)).set(offset)
        owned.waiters.reached(offset)

    async def wait_for(self, partition: int, offset: int, timeout_s: float) -> bool:
        """True once `offset` of `partition` is processed here; False if not owned or too late."""
        owned = self._owned.get(partition)
        if owned is None:
            return False
        if owned.processed >= offset:
            return True
        return await owned.waiters.wait(offset, timeout_s)
