"""The direct client's view of the grow registry (journal/client/growing.py `Registry`)."""

from __future__ import annotations

import asyncio
import threading
from typing import cast

from journal.client.growing import Registry
from journal.core.grow import Grow
from journal.store.base import EventualStore


class GatedRegistryStore:
    """A store whose registry reads answer when the test opens their gate."""

    def __init__(self) -> None:
        self.gates: asyncio.Queue[asyncio.Future[Grow | None]] = asyncio.Queue()
        self.reads = 0

    async def grow(self, topic: str) -> Grow | None:
        gate: asyncio.Future[Grow | None] = asyncio.get_running_loop().create_future()
        self.reads += 1
        self.gates.put_nowait(gate)
        return await gate


async def asked_as_a_read_finishes() -> int:
    """A caller asks afresh in the very step where the read before it finished, before that
    read's done callbacks ran: the registry reads again (and must not wait on the done read,
    which never yields to the loop). The reads the store saw."""
    store = GatedRegistryStore()
    registry = Registry(cast(EventualStore, store), "topic")
    first = asyncio.ensure_future(registry.fresh())
    (await store.gates.get()).set_result(None)
    # the second caller's first step comes right after the read's task finishes, whose done
    # callbacks come after it: none of them has run when the second caller asks
    second = asyncio.ensure_future(registry.fresh())
    (await store.gates.get()).set_result(None)
    assert await second is None
    assert await first is None
    return store.reads


def test_a_caller_asking_as_a_read_finishes_gets_a_newer_read() -> None:
    # the old code spun on the done read without ever yielding, so the loop (and a
    # pytest-timeout inside it) never ran again: the scenario runs on a thread of its own
    result: list[int] = []
    thread = threading.Thread(
        target=lambda: result.append(asyncio.run(asked_as_a_read_finishes())), daemon=True
    )
    thread.start()
    thread.join(30)  # a bound on the scenario's end (milliseconds), not a speed goal
    assert not thread.is_alive(), "Registry.fresh spins on a finished read"
    assert result == [2]
