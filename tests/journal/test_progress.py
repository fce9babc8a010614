from __future__ import annotations

import asyncio

from journal.progress import Progress


async def test_a_waiter_wakes_when_its_offset_is_processed() -> None:
    progress = Progress()
    await progress.advance(0, 3)
    waiter = asyncio.create_task(progress.wait_for(0, 7, timeout_s=5))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await progress.advance(0, 7)
    assert await waiter is True


async def test_waiting_is_bounded_and_fails_for_partitions_not_owned() -> None:
    progress = Progress()
    assert await progress.wait_for(1, 0, timeout_s=5) is False  # not owned: no wait
    await progress.advance(1, 0)
    assert await progress.wait_for(1, 5, timeout_s=0.05) is False
    assert progress.owns(1)
    await progress.revoke(1)
    assert not progress.owns(1)


async def test_offsets_never_go_back() -> None:
    progress = Progress()
    await progress.advance(0, 9)
    await progress.advance(0, 4)
    assert progress.offset(0) == 9
