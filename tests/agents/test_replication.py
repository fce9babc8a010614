"""The replicating agent's work (invariant 1: no acknowledged event is lost; 7: bad input never
stalls), over memory: the gap a (re)assigned partition finds between the store's pointer and
the agent's first record, the floor readers then need, catching up from the log when the
agent is behind the store or the store behind the agent, and the quarantine."""

from __future__ import annotations

import asyncio

import pytest

from journal.core.index import Indexed
from journal.core.model import JournalKey
from journal.kafka.poison import QUARANTINE_SKIPPED_HEADER, Poison, Skipped
from journal.metrics import METRICS
from tables.index import TableIndex
from tests.agents.memory import PARTITION, TOPIC, agent, replicated, until, until_pointer

A = JournalKey(TOPIC, "a")
B = JournalKey(TOPIC, "b")


async def test_after_the_assignments_catch_up_records_reach_the_store_by_the_queue() -> None:
    async with agent() as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        for record in [ag.log.append(A, 1, 2), ag.log.append(A, 3, 3), ag.log.delete(A, 1)]:
            await ag.handle(record)
        assert ag.owned.processed(PARTITION) == 2  # nothing was missing: trusted at once
        await until_pointer(ag, 2)
        assert await ag.store.seq_nrs(A) == [2, 3]
        assert ag.log.replays == [(0, 0)]  # the empty partition's end; nothing replayed since


async def test_a_record_past_the_stores_pointer_has_the_gap_caught_up_before_trust() -> None:
    async with agent() as ag:
        records = [ag.log.append(A, n, n) for n in range(1, 8)]  # offsets 0..6
        await replicated(ag.store, ag.log, through=2)  # Faust committed 3..5 unreplicated
        ag.log.gate.clear()  # the catch-up's consumer is still starting
        await ag.handle(records[6])
        assert ag.owned.floor(PARTITION) == 5  # readers need the store to hold 3..5
        assert ag.owned.processed(PARTITION) == -1  # the tables lack 3..5
        ag.log.gate.set()
        await until_pointer(ag, 6)
        assert await ag.store.seq_nrs(A) == list(range(1, 8))
        assert ag.log.replays == [(3, 7)]
        assert ag.owned.processed(PARTITION) == 6


async def test_a_record_right_after_the_stores_pointer_leaves_no_gap_to_catch_up() -> None:
    async with agent() as ag:
        records = [ag.log.append(A, n, n) for n in range(1, 5)]  # offsets 0..3
        await replicated(ag.store, ag.log, through=2)
        await ag.handle(records[3])
        # the tables may lack 0..2 all the same: a reader's row must reflect them
        assert ag.owned.floor(PARTITION) == 2
        assert ag.owned.processed(PARTITION) == 3
        await until_pointer(ag, 3)
        assert await ag.store.seq_nrs(A) == [1, 2, 3, 4]
        assert ag.log.replays == []


async def test_an_assigned_partition_catches_up_to_its_end_before_any_record_comes() -> None:
    async with agent() as ag:
        for n in range(1, 9):  # offsets 0..7
            ag.log.append(A, n, n)
        await replicated(ag.store, ag.log, through=2)
        ag.assigned()
        await until_pointer(ag, 7)
        assert await ag.store.seq_nrs(A) == list(range(1, 9))
        assert ag.log.replays == [(3, 8)]  # from the store's pointer, not from 0
        assert ag.owned.processed(PARTITION) == -1  # which records the tables lack is unknown

        await ag.handle(ag.log.append(A, 9, 9))
        # the store held all before it, but a reader's row may have been read before that
        assert ag.owned.floor(PARTITION) == 7
        assert ag.owned.processed(PARTITION) == 8
        await until_pointer(ag, 8)
        assert await ag.store.seq_nrs(A) == list(range(1, 10))


async def test_the_first_record_during_the_assignments_catch_up_sets_the_floor() -> None:
    async with agent() as ag:
        for n in range(1, 9):  # offsets 0..7
            ag.log.append(A, n, n)
        await replicated(ag.store, ag.log, through=2)
        ag.log.gate.clear()
        ag.assigned()
        await ag.handle(ag.log.append(A, 9, 9))  # offset 8: Faust committed through 7
        assert ag.owned.floor(PARTITION) == 7
        assert ag.owned.processed(PARTITION) == -1
        ag.log.gate.set()
        await until_pointer(ag, 8)
        assert ag.log.replays == [(3, 9)]  # through the agent's record
        assert await ag.store.seq_nrs(A) == list(range(1, 10))
        assert ag.owned.processed(PARTITION) == 8


async def test_a_reader_waiting_across_the_catch_up_is_told_to_read_its_row_past_the_gap() -> None:
    # the rolling restart's lost read: the previous owner handled offset 2 (seqNrs 3..5) but its
    # table change never reached the changelog; a reader's store row (1..2) predates the
    # catch-up that stores offset 2, and the agent's first record comes after that catch-up
    async with agent() as ag:
        index = TableIndex(ag.tables, ag.owned, wait_s=5)
        ag.log.append(A, 1, 1)
        ag.log.append(A, 2, 2)
        ag.log.append(A, 3, 5)  # offsets 0..2
        await replicated(ag.store, ag.log, through=1)
        covered = index.covered(PARTITION)  # the reading flow's order: covered, row, lookup
        row = await ag.store.meta(A)
        assert row is not None and row.state.offset == 1
        lookup = asyncio.create_task(index.lookup(A, PARTITION, fence=3))
        ag.assigned()
        await until_pointer(ag, 2)  # the catch-up went to the partition's end
        await ag.handle(ag.log.append(B, 1, 1))  # offset 3: Faust committed through 2
        found = await lookup
        assert isinstance(found, Indexed)
        assert found.runs == ()  # the tables never saw offset 2 ...
        assert found.needs >= 2 and found.needs > covered  # ... so the row must be read again


async def test_when_the_stores_writes_fail_the_queue_is_replayed_from_the_log() -> None:
    async with agent() as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        ag.store.failing = True
        for n in range(1, 6):  # offsets 0..4
            await ag.handle(ag.log.append(A, n, n))
        await until(lambda: len(ag.log.replays) >= 2, "a replay after the failed write")
        ag.store.failing = False
        await until_pointer(ag, 4)
        assert await ag.store.seq_nrs(A) == [1, 2, 3, 4, 5]
        assert {start for start, _ in ag.log.replays[1:]} == {0}  # from the store's pointer


async def test_a_queue_past_its_bound_is_dropped_and_replayed_from_the_log() -> None:
    async with agent(queued_records=3) as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        ag.store.gate.clear()  # a slow store: the queue grows
        for n in range(1, 7):  # offsets 0..5
            await ag.handle(ag.log.append(A, n, n))
        ag.store.gate.set()
        await until_pointer(ag, 5)
        assert await ag.store.seq_nrs(A) == [1, 2, 3, 4, 5, 6]
        assert ag.log.replays == [(0, 0), (0, 6)]


async def test_a_partition_met_while_the_store_is_down_catches_up_from_its_pointer() -> None:
    async with agent() as ag:
        records = [ag.log.append(A, n, n) for n in range(1, 7)]  # offsets 0..5
        await replicated(ag.store, ag.log, through=2)
        ag.store.down = True
        await ag.handle(records[5])
        await until(lambda: ag.store.refused >= 2, "the replicator asked the store")
        assert ag.owned.processed(PARTITION) == -1
        ag.store.down = False
        await until_pointer(ag, 5)
        assert ag.log.replays == [(3, 6)]  # not what the store held already
        assert await ag.store.seq_nrs(A) == [1, 2, 3, 4, 5, 6]
        assert ag.owned.processed(PARTITION) == 5


async def test_a_malformed_record_is_quarantined_once_before_the_pointer_passes_it() -> None:
    async with agent() as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        ag.store.failing = True  # so the records are replayed, the malformed one too
        malformed = [ag.log.append(A, 1, 1), ag.log.malformed(A), ag.log.append(A, 2, 2)]
        for record in malformed:
            await ag.handle(record)
        await until(lambda: len(ag.log.replays) >= 2, "a replay after the failed write")
        ag.store.failing = False
        await until_pointer(ag, 2)
        assert ag.quarantine.delivered == [(malformed[1], "no journal.action header")]
        assert all(delivered == 1 for pointer, delivered in ag.store.saved if pointer >= 1)
        assert await ag.store.seq_nrs(A) == [1, 2]  # replication went on past it


async def test_a_skipped_undecodable_batch_is_quarantined_before_the_pointer_passes() -> None:
    async with agent() as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        for n in range(1, 4):  # offsets 0..2
            await ag.handle(ag.log.append(A, n, n))
        await until_pointer(ag, 2)
        ag.log.undecodable(2)  # offsets 3..4, which the consumer went past
        ag.skipped.put(Skipped(Poison(TOPIC, PARTITION, 3, "UnsupportedCodecError()"), 5))
        await ag.handle(ag.log.append(A, 4, 4))  # offset 5
        await until_pointer(ag, 5)
        [(marker, reason)] = ag.quarantine.delivered
        assert reason == "undecodable batch: UnsupportedCodecError()"
        assert (marker.partition, marker.offset) == (PARTITION, 4)
        assert marker.headers == [(QUARANTINE_SKIPPED_HEADER, b"0:3-4")]
        assert all(delivered == 1 for pointer, delivered in ag.store.saved if pointer >= 3)
        assert ag.skipped.take() == []
        assert await ag.store.seq_nrs(A) == [1, 2, 3, 4]


async def test_records_handled_during_a_catch_up_wait_in_the_log_not_in_the_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with agent(queued_records=3) as ag:
        ag.log.gate.clear()
        ag.assigned()
        for n in range(1, 7):  # offsets 0..5
            await ag.handle(ag.log.append(A, n, n))
        ag.log.gate.set()
        await until_pointer(ag, 5)
        assert ag.log.replays == [(0, 6)]
        assert await ag.store.seq_nrs(A) == [1, 2, 3, 4, 5, 6]
        assert "queue full" not in caplog.text  # nothing was queued to overflow


async def test_a_quarantine_that_fails_is_retried_and_the_agent_goes_on() -> None:
    async with agent() as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        ag.quarantine.failures = 1
        malformed = ag.log.malformed(A)
        await ag.handle(malformed)
        await ag.handle(ag.log.append(A, 1, 1))
        await until_pointer(ag, 1)
        assert ag.quarantine.delivered == [(malformed, "no journal.action header")]
        assert await ag.store.seq_nrs(A) == [1]


async def test_a_record_of_a_partition_revoked_while_its_pointer_is_read_is_left_alone() -> None:
    # only Faust's assignment makes an owner: else two workers would replicate the partition,
    # and this one's later assignment would skip its catch-up and fold onto stale rows
    async with agent() as ag:
        record = ag.log.append(A, 1, 1)
        ag.store.pointer_gate.clear()
        handling = asyncio.create_task(ag.handle(record))
        await until(lambda: ag.store.pointer_reads == 1, "the agent reads the pointer")
        await ag.work.revoke(PARTITION)
        ag.store.pointer_gate.set()
        await handling
        assert not ag.owned.owns(PARTITION)
        ag.owned.assign(PARTITION)  # it comes back: a fresh start, the catch-up included
        ag.work.assigned(PARTITION)
        await until_pointer(ag, 0)
        assert await ag.store.seq_nrs(A) == [1]


async def test_a_revoked_partition_has_no_lag_or_offset_series_left() -> None:
    """Its new owner reports them: a worker that lost it must not report its last values."""
    labels = {"topic": TOPIC, "partition": str(PARTITION)}
    lag = ("kafka_journal_replication_lag_records", "kafka_journal_replication_lag_seconds")
    async with agent() as ag:
        ag.assigned()
        await ag.handle(ag.log.append(A, 1, 1))
        await until_pointer(ag, 0)
        await until(lambda: _sample(lag[0], labels) is not None, "the lag is published")
        assert _sample("kafka_journal_agent_offset", {"partition": str(PARTITION)}) == 0
        await ag.work.revoke(PARTITION)
        assert [_sample(name, labels) for name in lag] == [None, None]
        assert _sample("kafka_journal_agent_offset", {"partition": str(PARTITION)}) is None


def _sample(name: str, labels: dict[str, str]) -> float | None:
    return METRICS.registry.get_sample_value(name, labels)


async def test_a_catch_up_past_the_agents_records_does_not_tell_readers_the_tables_hold_them() -> (
    None
):
    # the assignment's catch-up replays to the partition's end, past the agent's first record:
    # the store holds offsets 3..4 then, the tables only once the agent handles them; a reader
    # whose row predates the catch-up found only offset 2 in the tables and lost 3..4
    async with agent() as ag:
        index = TableIndex(ag.tables, ag.owned, wait_s=5)
        ag.log.append(A, 1, 1)
        ag.log.append(A, 2, 2)  # offsets 0..1, stored by the previous owner
        await replicated(ag.store, ag.log, through=1)
        covered = index.covered(PARTITION)  # the reading flow's order: covered, row, lookup
        row = await ag.store.meta(A)
        assert row is not None and row.state.offset == 1
        records = [ag.log.append(A, n, n) for n in range(3, 6)]  # offsets 2..4
        lookup = asyncio.create_task(index.lookup(A, PARTITION, fence=5))
        ag.log.gate.clear()
        ag.assigned()
        await ag.handle(records[0])  # Faust committed through 1
        ag.log.gate.set()
        await until_pointer(ag, 4)  # the catch-up went to the partition's end
        for record in records[1:]:
            await ag.handle(record)
        found = await lookup
        assert isinstance(found, Indexed)
        # the runs the reader fetches, or the row it must read again, reach offset 4
        reach = max([found.needs] + [r.last for r in found.runs])
        assert reach == 4 and (found.runs or found.needs > covered), found


async def test_a_quiet_partition_publishes_its_committed_position_at_the_assignment() -> None:
    # issue 43: after a restart, a partition that gets no record learns its position from the
    # group's committed offset (the purger waits for it); the tables are empty (the changelog
    # writes lost), so the floor tells readers to read the store up to there
    async with agent() as ag:
        for n in range(1, 4):  # offsets 0..2, handled by the previous owner
            ag.log.append(A, n, n)
        ag.log.committed = 3
        ag.assigned()
        await until(lambda: ag.owned.processed(PARTITION) == 2, "the committed position")
        assert ag.owned.floor(PARTITION) == 2
        assert await ag.store.seq_nrs(A) == [1, 2, 3]


async def test_a_first_record_past_the_committed_position_publishes_once_the_store_holds_it() -> (
    None
):
    # the consumer went past an undecodable batch after the assignment's catch-up ended: the
    # first record moves the gap's end and the floor past it, and the store must reach them
    async with agent() as ag:
        ag.log.append(A, 1, 1)  # offset 0
        ag.log.committed = 1
        ag.assigned()
        await until(lambda: ag.owned.processed(PARTITION) == 0, "the committed position")
        ag.log.undecodable(2)  # offsets 1..2
        ag.skipped.put(Skipped(Poison(TOPIC, PARTITION, 1, "UnsupportedCodecError()"), 3))
        await ag.handle(ag.log.append(A, 2, 2))  # offset 3
        assert ag.owned.floor(PARTITION) == 2
        await until(lambda: ag.owned.processed(PARTITION) == 3, "the first record published")
        assert await ag.store.seq_nrs(A) == [1, 2]


@pytest.mark.parametrize(("cached_rows", "reads"), [(2, [A, B]), (1, [A, B, A])])
async def test_replication_keeps_the_rows_it_wrote_last_up_to_its_setting(
    cached_rows: int, reads: list[JournalKey]
) -> None:
    # 2 rows kept: A's and B's; 1: only the last written, so A's is read again
    async with agent(cached_rows=cached_rows) as ag:
        ag.assigned()
        await until(lambda: ag.log.replays, "the assignment's catch-up")
        for offset, (key, seq_nr) in enumerate([(A, 1), (B, 1), (A, 2)]):
            await ag.handle(ag.log.append(key, seq_nr, seq_nr))
            await until_pointer(ag, offset)  # a batch each: each its own rows' lookup
        assert ag.store.row_reads == reads
        assert await ag.store.seq_nrs(A) == [1, 2]


async def test_an_agent_behind_kafka_shows_its_backlogs_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing queued for the store while Kafka holds more: the agent is behind, and the age
    gauge says how far (the last handled record's age bounds the next one's). It read 0, so an
    alert on the age missed a slow agent. While nothing arrives the age keeps growing."""
    import time

    import agents.replication

    monkeypatch.setattr(agents.replication, "LAG_REFRESH_S", 0.05)
    labels = {"topic": TOPIC, "partition": str(PARTITION)}
    async with agent() as ag:  # no catch-up at an assignment: it would replay to the end
        first = ag.log.append(A, 1, 1)
        ag.log.append(A, 2, 2)
        ag.log.append(A, 3, 3)  # in Kafka, not handled: the agent's consumer is behind
        started = time.time()
        await ag.handle(first)
        await until_pointer(ag, 0)

        def lag() -> tuple[float | None, float | None]:
            return (
                _sample("kafka_journal_replication_lag_records", labels),
                _sample("kafka_journal_replication_lag_seconds", labels),
            )

        await until(lambda: lag()[0] == 2, "two records lag")
        seconds = lag()[1]
        assert seconds is not None and seconds >= started - first.timestamp_ms / 1000
        await until(lambda: (lag()[1] or 0) > seconds, "the age grows while nothing arrives")
