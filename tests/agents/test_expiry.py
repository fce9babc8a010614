"""The purge of expired journals by their partition's owner (agents/expiry.py), over memory: due
journals get one Purge each with origin `expired`, only once the agent reached the partition's
fence (an Append it had not seen yet moves the deadline), and none while the group rebalances."""

from __future__ import annotations

import asyncio

from agents.expiry import EXPIRED_ORIGIN, Expirer
from journal.core.model import JournalKey, Position
from journal.metrics import METRICS
from tables.expiry import ExpiryIndex
from tables.partitions import OwnedPartitions
from tests.support.expiry import T0_MS, Table, append

TOPIC = "t"


class Log:
    """The journal writer's purge and the fence over one partition of a log in memory."""

    def __init__(self) -> None:
        self.end = 0
        self.purges: list[tuple[JournalKey, str | None]] = []

    async def purge(self, key: JournalKey, *, origin: str | None = None) -> Position:
        self.purges.append((key, origin))
        self.end += 1
        return Position(0, self.end - 1)

    async def fence(self, key: JournalKey, partition: int) -> int:
        return self.end

    async def close(self) -> None:
        return None


def expirer(
    index: ExpiryIndex, owned: OwnedPartitions, log: Log, settled: list[bool] | None = None
) -> Expirer:
    state = [True] if settled is None else settled
    return Expirer(TOPIC, index, owned, log, log, lambda: state[0], wait_s=0.2)


def expired_total() -> float:
    return METRICS.value("kafka_journal_journals_expired_total")


async def test_a_due_journal_is_purged_once_with_its_origin() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    index.record(append("j", 0, "3 seconds"))
    index.record(append("k", 1, "1 day"))
    log.end = 2
    owned.advance(0, 1)
    before = expired_total()
    purging = expirer(index, owned, log)
    assert await purging.tick(T0_MS + 2999) == 0
    assert await purging.tick(T0_MS + 3000) == 1
    assert log.purges == [(JournalKey(TOPIC, "j"), EXPIRED_ORIGIN)]
    assert expired_total() == before + 1
    assert await purging.tick(T0_MS + 3001) == 0  # produced: not due again
    assert len(log.purges) == 1


async def test_an_append_the_agent_had_not_seen_moves_the_deadline_before_the_purge() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    index.record(append("j", 0, "3 seconds"))
    owned.advance(0, 0)
    log.end = 2  # an Append of j at offset 1, before its deadline, not handled yet
    tick = asyncio.create_task(expirer(index, owned, log).tick(T0_MS + 3000))
    await asyncio.sleep(0.01)
    assert not tick.done()  # waits for the agent to reach the fence
    index.record(append("j", 1, "3 seconds", after_ms=2000))
    owned.advance(0, 1)
    assert await tick == 0
    assert log.purges == []


async def test_nothing_is_purged_while_the_agent_is_behind_or_the_group_rebalances() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    index.record(append("j", 0, "1 second"))
    log.end = 5
    owned.advance(0, 0)  # offsets 1..4 not handled: the tick gives up after its wait
    settled = [True]
    purging = expirer(index, owned, log, settled)
    assert await purging.tick(T0_MS + 1000) == 0
    owned.advance(0, 4)
    settled[0] = False
    assert await purging.tick(T0_MS + 1000) == 0
    settled[0] = True
    assert await purging.tick(T0_MS + 1000) == 1
    assert log.purges == [(JournalKey(TOPIC, "j"), EXPIRED_ORIGIN)]


async def test_only_owned_partitions_are_looked_at() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    index.record(append("j", 0, "1 second"))  # partition 0, not owned (any more)
    assert await expirer(index, owned, log).tick(T0_MS + 1000) == 0
    assert log.purges == []
