"""Invariant 2 with both fences: every read that starts after an append was acknowledged
returns it, under concurrent writers and across a broker restart.

The reader is a second direct client (another process would behave the same: it shares
nothing with the writer but Kafka and Cassandra). The stack has one broker, so the restart is
also the partition leader's change: leaderless while it is down, the same node after.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from journal.client.journals import Journals
from journal.core.model import Ack, Event, EventRecord, JsonPayload
from journal.errors import Unavailable
from stack import Stack
from tests.support.eventually import answered
from tests.support.harness import settings_for, unique

pytestmark = pytest.mark.integration

T = TypeVar("T")
JOURNALS = 4
APPENDS = 12  # per journal; the restart happens while they run


async def despite_the_restart(attempt: Callable[[], Awaitable[T]], what: str) -> T:
    """`attempt()`'s answer, retried while the restart fails it (or it hangs: given up after
    15 s and tried again)."""
    return await answered(
        lambda: asyncio.wait_for(attempt(), timeout=15),
        what,
        retry_on=(Unavailable, TimeoutError, ConnectionError),
        interval_s=0.2,
    )


@pytest.mark.parametrize("fence", ["high_watermark", "mark"])
async def test_reads_see_every_acknowledged_append_across_a_broker_restart(
    stack: Stack, fence: str
) -> None:
    settings = settings_for(stack, unique("ryw"), unique("kj_ryw")).replace(read_fence=fence)
    checked = 0
    a_third_done = asyncio.Event()
    writer = await Journals.connect(settings)
    reader = await Journals.connect(settings)
    async with writer, reader:

        async def write_and_read(journal_id: str) -> None:
            nonlocal checked
            journal = writer.journal(journal_id)
            for n in range(1, APPENDS + 1):
                batch = [Event(n, payload=JsonPayload.of({"n": n}))]
                # a retry after a lost answer repeats the append: a no-op if the first landed
                await despite_the_restart(
                    lambda: journal.append(batch, ack=Ack.KAFKA),  # noqa: B023
                    "append",
                )
                read = await despite_the_restart(
                    lambda: _seq_nrs(reader.journal(journal_id).read()),
                    f"read of {journal_id}",
                )
                assert read == list(range(1, n + 1)), f"{journal_id} after {n} was acknowledged"
                checked += 1
                if checked == JOURNALS * APPENDS // 3:
                    a_third_done.set()

        async def restart_midway() -> None:
            await a_third_done.wait()
            await asyncio.to_thread(stack.kafka.restart)

        writers = [write_and_read(f"j{i}") for i in range(JOURNALS)]
        await asyncio.gather(restart_midway(), *writers)
    assert checked == JOURNALS * APPENDS


async def _seq_nrs(records: AsyncIterator[EventRecord]) -> list[int]:
    return [r.seq_nr async for r in records]
