from __future__ import annotations

import asyncio

from tables.partitions import OwnedPartitions


async def test_a_waiter_wakes_when_its_offset_is_processed() -> None:
    progress = OwnedPartitions()
    progress.assign(0)
    progress.advance(0, 3)
    waiter = asyncio.create_task(progress.wait_for(0, 7, timeout_s=5))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    progress.advance(0, 7)
    assert await waiter is True


async def test_waiting_is_bounded_and_fails_for_partitions_not_owned() -> None:
    progress = OwnedPartitions()
    assert await progress.wait_for(1, 0, timeout_s=5) is False  # not owned: no wait
    progress.assign(1)
    assert progress.owns(1) and progress.processed(1) == -1
    progress.advance(1, 0)
    assert await progress.wait_for(1, 5, timeout_s=0.05) is False
    assert progress.owns(1)
    progress.revoke(1)
    assert not progress.owns(1)


async def test_offsets_never_go_back() -> None:
    progress = OwnedPartitions()
    progress.assign(0)
    progress.advance(0, 9)
    progress.advance(0, 4)
    assert progress.processed(0) == 9


async def test_only_an_assignment_makes_a_partition_owned() -> None:
    # a record handled after its partition was revoked must not make this worker its owner
    owned = OwnedPartitions()
    owned.assign(0)
    owned.revoke(0)
    owned.advance(0, 9)
    owned.set_floor(0, 4)
    assert not owned.owns(0) and owned.processed(0) == -1 and owned.floor(0) == -1


async def test_the_replicated_pointer_only_grows_and_goes_with_the_partition() -> None:
    owned = OwnedPartitions()
    owned.set_replicated(0, 5)  # not owned: nothing to remember
    assert owned.replicated(0) == -1
    owned.assign(0)
    owned.set_replicated(0, 5)
    owned.set_replicated(0, 3)
    assert owned.replicated(0) == 5
    owned.revoke(0)
    assert owned.replicated(0) == -1 and owned.floor(0) == -1


async def test_an_advance_wakes_exactly_the_readers_it_satisfies() -> None:
    progress = OwnedPartitions()
    progress.assign(0)
    waiters = {n: asyncio.create_task(progress.wait_for(0, n, timeout_s=5)) for n in (2, 5, 9)}
    await asyncio.sleep(0)  # each is waiting now
    progress.advance(0, 5)
    assert await waiters[2] is True and await waiters[5] is True
    assert not waiters[9].done()
    progress.revoke(0)  # the partition went: the last one gives up at once
    assert await waiters[9] is False
