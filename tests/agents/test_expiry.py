"""The purge of expired journals by their partition's owner (agents/expiry.py), over memory: due
journals get one Purge each with origin `expired`, only once the agent reached the partition's
fence (an Append it had not seen yet moves the deadline) and the fold confirmed the deadline (a
rejected Append neither purges nor clears one), and none while the group rebalances."""

from __future__ import annotations

import asyncio

from agents.expiry import EXPIRED_ORIGIN, Expirer
from journal.core.model import JournalKey
from journal.errors import JournalMoving
from journal.metrics import METRICS
from tables.expiry import FOREVER, ExpiryIndex
from tables.partitions import OwnedPartitions
from tests.support import actions as a
from tests.support.expiry import T0_MS, Log, Table, append

TOPIC = "t"


def expirer(
    index: ExpiryIndex, owned: OwnedPartitions, log: Log, settled: list[bool] | None = None
) -> Expirer:
    state = [True] if settled is None else settled
    return Expirer(TOPIC, index, owned, log, log, lambda: state[0], wait_s=0.2, deadlines=log)


def expired_total() -> float:
    return METRICS.value("kafka_journal_journals_expired_total")


async def test_a_due_journal_is_purged_once_with_its_origin() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    log.handle(index, append("j", 0, "3 seconds"))
    log.handle(index, append("k", 1, "1 day"))
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
    log.handle(index, append("j", 0, "3 seconds"))
    owned.advance(0, 0)
    log.end = 2  # an Append of j at offset 1, before its deadline, not handled yet
    tick = asyncio.create_task(expirer(index, owned, log).tick(T0_MS + 3000))
    await asyncio.sleep(0.01)
    assert not tick.done()  # waits for the agent to reach the fence
    log.handle(index, append("j", 1, "3 seconds", after_ms=2000, seq_nr=2))
    owned.advance(0, 1)
    assert await tick == 0
    assert log.purges == []


async def test_nothing_is_purged_while_the_agent_is_behind_or_the_group_rebalances() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    log.handle(index, append("j", 0, "1 second"))
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


async def test_a_rejected_append_with_expire_after_purges_nothing() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    log.handle(index, append("j", 0, None))
    log.handle(index, append("j", 1, "1 second", seq_nr=3))  # a rival's: rejected (conflict)
    log.handle(index, append("k", 2, "1 second"))
    log.handle(index, append("k", 3, "1 second", seq_nr=1))  # a retry's: rejected (duplicate)
    log.end = 4
    owned.advance(0, 3)
    purging = expirer(index, owned, log)
    assert await purging.tick(T0_MS + 1000) == 1  # k's own deadline, not j
    assert log.purges == [(JournalKey(TOPIC, "k"), EXPIRED_ORIGIN)]
    reads = log.reads
    assert await purging.tick(FOREVER - 1) == 0  # j was settled: no deadline, not read again
    assert log.reads == reads and log.purges == [(JournalKey(TOPIC, "k"), EXPIRED_ORIGIN)]


async def test_a_rejected_append_without_expire_after_clears_no_deadline() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    log.handle(index, append("j", 0, "3 seconds"))
    log.handle(index, append("j", 1, None, after_ms=1000, seq_nr=3))  # a rival's: rejected
    log.end = 2
    owned.advance(0, 1)
    assert await expirer(index, owned, log).tick(T0_MS + 3000) == 1
    assert log.purges == [(JournalKey(TOPIC, "j"), EXPIRED_ORIGIN)]


async def test_a_deadline_the_last_accepted_append_moved_later_is_settled_there() -> None:
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), Log()
    owned.assign(0)
    log.handle(index, append("j", 0, "1 second"))
    log.handle(index, append("j", 1, "5 seconds", after_ms=500, seq_nr=2))
    log.handle(index, append("k", 2, "1 second"))
    log.handle(index, append("k", 3, None, after_ms=500, seq_nr=2))  # accepted: none now
    log.end = 4
    owned.advance(0, 3)
    purging = expirer(index, owned, log)
    assert await purging.tick(T0_MS + 1000) == 0
    assert await purging.tick(T0_MS + 5499) == 0
    assert await purging.tick(T0_MS + 5500) == 1
    assert log.purges == [(JournalKey(TOPIC, "j"), EXPIRED_ORIGIN)]
    log.handle(index, a.purge(JournalKey(TOPIC, "j"), 4))
    assert await purging.tick(FOREVER - 1) == 0


class MovingLog(Log):
    """The reading flow while a grow moves `j`: its deadline cannot be read yet (the cut of its
    partition not learnt in time, or the grown topic not answering)."""

    async def deadline(self, key: JournalKey, until: int) -> int | None:
        if key.id == "j":
            self.reads += 1
            raise JournalMoving(f"{key}: the cut not learnt yet")
        return await super().deadline(key, until)


async def test_a_deadline_not_readable_yet_stays_due_without_holding_up_the_others() -> None:
    """A moved journal's deadline is read where it is now (`JournalDeadlines` follows the
    grow); while that read is unavailable its candidate stays due for a later tick, and the
    other due journals of its partition are purged meanwhile."""
    index, owned, log = ExpiryIndex(Table()), OwnedPartitions(), MovingLog()
    owned.assign(0)
    log.handle(index, append("j", 0, "1 second"))
    log.handle(index, append("k", 1, "1 second"))
    log.end = 2
    owned.advance(0, 1)
    purging = expirer(index, owned, log)
    assert await purging.tick(T0_MS + 1000) == 1
    assert log.purges == [(JournalKey(TOPIC, "k"), EXPIRED_ORIGIN)]
    log.handle(index, a.purge(JournalKey(TOPIC, "k"), 2))  # the agent handles k's Purge
    owned.advance(0, 2)
    reads = log.reads
    assert await purging.tick(T0_MS + 2000) == 0
    assert log.reads == reads + 1 and index.due(0, T0_MS + 2000) == ["j"]  # asked again
