"""OffsetWaiters (journal/core/waiters.py): a move wakes exactly the waiters it satisfies."""

from __future__ import annotations

import asyncio

from journal.core.waiters import OffsetWaiters


async def test_a_move_wakes_the_waiters_at_or_below_it_only() -> None:
    waiters = OffsetWaiters()
    low = asyncio.ensure_future(waiters.wait(5, 60))
    high = asyncio.ensure_future(waiters.wait(9, 60))
    await asyncio.sleep(0)
    waiters.reached(5)
    assert await low is True
    assert not high.done()
    waiters.miss_all()
    assert await high is False


async def test_a_waiter_past_its_deadline_misses() -> None:
    waiters = OffsetWaiters()
    assert await waiters.wait(1, 0.01) is False
    waiters.reached(1)  # nobody left to wake


async def test_waiters_past_their_deadline_are_dropped_once_many() -> None:
    waiters = OffsetWaiters()
    assert not any(await asyncio.gather(*(waiters.wait(n, 0.01) for n in range(1001))))
    assert len(waiters._heap) <= 1000
