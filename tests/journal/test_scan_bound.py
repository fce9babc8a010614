"""A worker's scans of a partition from offset 0 with the store down are bounded: one more
answers StoreUnavailable (503) at once instead of taking the CPU the agent needs to index the
backlog that would let its tables answer (issue 43). Doubles of the parts the reading flow
holds: what is tested is the flow's own decision."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import pytest

from journal.client.reading import ReadingFlow
from journal.core.index import BEHIND, IndexAnswer, NotIndexed
from journal.core.model import ActionRecord, JournalKey
from journal.errors import StoreUnavailable
from journal.kafka.records import KafkaReadConfig, KafkaRecords
from journal.metrics import METRICS
from journal.store.base import JournalMeta
from journal.store.memory import MemoryStore
from kjconfig.access import KafkaAccess
from tests.support.eventually import eventually
from tests.support.stores import DelegatingJournal

KEY = JournalKey("topic", "j")


class _Down(DelegatingJournal):
    async def meta(self, key: JournalKey) -> JournalMeta | None:
        raise StoreUnavailable("down")


class _Behind:
    """A worker's tables that cannot tell: their agent has not published the partition since
    it took it over ("unpublished"), or is behind the fence ("behind")."""

    def __init__(self, reason: str = "unpublished") -> None:
        self.reason = reason

    def covered(self, partition: int) -> int:
        return -1

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        return NotIndexed(self.reason)

    async def close(self) -> None:
        return None


class _Fence:
    async def fence(self, key: JournalKey, partition: int) -> int:
        return 10

    async def close(self) -> None:
        return None


class _Scans:
    """Kafka's records: a scan that holds on until released, counting those running."""

    def __init__(self) -> None:
        self.config = KafkaReadConfig(KafkaAccess("127.0.0.1:1"))
        self.running = 0
        self.release = asyncio.Event()

    async def scan(
        self, key: JournalKey, partition: int, after: int | None, fence: int
    ) -> AsyncIterator[ActionRecord]:
        self.running += 1
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        nothing: tuple[ActionRecord, ...] = ()
        for action in nothing:
            yield action

    async def log_start(self, topic: str, partition: int) -> int:
        return 0


def _flow(scans: _Scans, reason: str = "unpublished") -> ReadingFlow:
    flow = ReadingFlow(
        lambda key: 0,
        _Down(MemoryStore()),
        _Behind(reason),
        _Fence(),
        cast(KafkaRecords, scans),
        scan_without_store=True,
    )
    flow.limit_scans(1)
    return flow


async def test_past_the_bound_a_read_that_would_scan_is_refused_at_once() -> None:
    scans = _Scans()
    flow = _flow(scans)
    first = asyncio.create_task(flow.view(KEY))

    async def scanning(count: int) -> bool:
        return scans.running == count

    await eventually(lambda: scanning(1), "the first read scans", interval_s=0.01)
    second = asyncio.create_task(flow.view(KEY))

    async def settled() -> bool:  # refused, or (unbounded) a second scan running
        return second.done() or scans.running == 2

    await eventually(settled, "the second read settles", interval_s=0.01)
    assert scans.running == 1
    with pytest.raises(StoreUnavailable, match="scans are running already"):
        await second
    scans.release.set()
    assert (await first).head.state.seq_nr == 0
    assert (await flow.view(KEY)).head.state.seq_nr == 0  # the turn is free again


async def test_a_read_its_publishing_agent_is_only_behind_is_refused_without_a_scan() -> None:
    # the agent gets there: a scan meanwhile would take the CPU it needs (issue 43's profile)
    scans = _Scans()
    scans.release.set()
    before = _scanned()
    with pytest.raises(StoreUnavailable, match="the index cannot tell \\(behind\\)"):
        await _flow(scans, BEHIND).view(KEY)
    assert _scanned() == before
    # tables that wait for the store to hold their gap: nothing but a scan answers
    await _flow(scans, "unpublished").view(KEY)
    assert _scanned() == before + 1


def _scanned() -> float:
    return METRICS.value("kafka_journal_reads_total", path="kafka_only_scan")
