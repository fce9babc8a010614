"""Readers waiting for a partition's progress to reach an offset, each with a deadline.

A heap of (offset, arrival, future), the lowest offset first, so a move wakes exactly the
waiters it satisfies (an event or condition would wake every waiter on every move: with 64
readers waiting, 64 task steps per record). A deadline is a timer handle, not
`asyncio.wait_for` or `asyncio.timeout`: no task and no Timeout object on a read's path.
Used by the tail index (journal/kafka/tail.py) and the worker's owned partitions
(tables/partitions.py).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

_KEPT = 1000  # above it, the waiters past their deadline are dropped from the heap
_arrivals = itertools.count()  # orders waiters of one offset; futures do not compare


class OffsetWaiters:
    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[bool]]] = []

    async def wait(self, offset: int, timeout_s: float) -> bool:
        """True once `reached(n)` with n >= `offset`; False after `timeout_s`, or at
        `miss_all`."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._heap, (offset, next(_arrivals), waiter))
        timer = loop.call_later(timeout_s, _too_late, waiter)
        try:
            reached = await waiter
        finally:
            timer.cancel()
        if not reached and len(self._heap) > _KEPT:  # timed-out ones pile up while stuck
            self._heap = [entry for entry in self._heap if not entry[2].done()]
            heapq.heapify(self._heap)
        return reached

    def reached(self, offset: int) -> None:
        """Progress reached `offset`: the waiters for it or below go on."""
        heap = self._heap
        while heap and heap[0][0] <= offset:
            waiter = heapq.heappop(heap)[2]
            if not waiter.done():  # else it timed out or was cancelled
                waiter.set_result(True)

    def miss_all(self) -> None:
        """No progress will come (unfollowed, revoked): every waiter misses at once."""
        for _, _, waiter in self._heap:
            if not waiter.done():
                waiter.set_result(False)
        self._heap.clear()


def _too_late(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
