"""The semantic suite of "a journal": every way to reach journals passes it.

A subclass provides the `api` fixture (a tests.support.journal_api.JournalApi) and a fresh
`journal_id` per test. `api.settle()` lets replication run where the subclass wants it to: an
`api` that asks for `replicating` runs the suite twice, with nothing replicated and with
replication between steps.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from journal.core.model import BinaryPayload, Event, JsonPayload, TextPayload
from tests.support.journal_api import JournalApi


def events(first: int, last: int) -> list[Event]:
    return [
        Event(n, frozenset({"even" if n % 2 == 0 else "odd"}), JsonPayload.of({"n": n}))
        for n in range(first, last + 1)
    ]


def seq_nrs(got: list[Event]) -> list[int]:
    return [e.seq_nr for e in got]


class JournalContract:
    @pytest.fixture
    def journal_id(self) -> str:
        return f"j-{uuid.uuid4().hex[:12]}"

    @pytest.fixture(
        scope="class",
        params=[False, True],
        ids=["nothing_replicated", "replicated_between_steps"],
    )
    @classmethod
    def replicating(cls, request: pytest.FixtureRequest) -> bool:
        """Whether the `api` asking for it replicates in settle()."""
        return bool(request.param)

    async def test_an_unknown_journal_is_empty(self, api: JournalApi, journal_id: str) -> None:
        assert await api.read(journal_id) == []
        assert await api.info(journal_id) == (None, None)

    async def test_reads_its_own_writes(self, api: JournalApi, journal_id: str) -> None:
        await api.append(journal_id, events(1, 3))
        assert await api.read(journal_id) == events(1, 3)
        await api.settle()
        await api.append(journal_id, events(4, 5))
        assert await api.read(journal_id) == events(1, 5)
        assert await api.info(journal_id) == (5, None)

    async def test_two_writers_racing_the_first_in_the_log_wins(
        self, api: JournalApi, journal_id: str
    ) -> None:
        """Invariant 8: B's append does not continue the journal A left, so it never counts,
        before or after replication (the store keeps no trace of it either)."""
        a = [Event(n, payload=JsonPayload.of({"writer": "a", "n": n})) for n in (1, 2, 3)]
        b = [Event(n, payload=JsonPayload.of({"writer": "b", "n": n})) for n in (1, 2)]
        await api.append(journal_id, a)
        await api.append(journal_id, b)
        assert await api.read(journal_id) == a
        assert await api.info(journal_id) == (3, None)
        await api.settle()
        assert await api.read(journal_id) == a
        assert await api.info(journal_id) == (3, None)

    async def test_an_append_must_continue_the_journal(
        self, api: JournalApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(2, 3))  # a new journal starts at 1
        await api.append(journal_id, events(1, 1))
        await api.append(journal_id, events(3, 4))  # leaves a gap after 1
        await api.append(journal_id, events(2, 2))
        assert await api.read(journal_id) == events(1, 2)
        await api.settle()
        assert await api.read(journal_id) == events(1, 2)

    async def test_a_retried_append_is_a_no_op(self, api: JournalApi, journal_id: str) -> None:
        await api.append(journal_id, events(1, 2))
        await api.append(journal_id, events(1, 2))  # a client retrying after a lost answer
        await api.append(journal_id, events(3, 3))
        assert await api.read(journal_id) == events(1, 3)
        await api.settle()
        await api.append(journal_id, events(3, 3))
        assert await api.read(journal_id) == events(1, 3)
        assert await api.info(journal_id) == (3, None)

    async def test_every_payload_kind_round_trips(self, api: JournalApi, journal_id: str) -> None:
        written = [
            Event(1, frozenset({"a", "b"}), JsonPayload.of({"k": [1, 2.5, None, True, "s"]})),
            Event(2, frozenset(), TextPayload("plain text ✓")),
            Event(3, frozenset({"bin"}), BinaryPayload(bytes(range(256)))),
            Event(4),
        ]
        await api.append(journal_id, written)
        await api.settle()
        assert await api.read(journal_id) == written

    async def test_range_and_limit(self, api: JournalApi, journal_id: str) -> None:
        await api.append(journal_id, events(1, 4))
        await api.settle()
        await api.append(journal_id, events(5, 9))
        assert seq_nrs(await api.read(journal_id, from_=3, to=6)) == [3, 4, 5, 6]
        assert seq_nrs(await api.read(journal_id, from_=2, limit=4)) == [2, 3, 4, 5]
        assert await api.read(journal_id, from_=10) == []

    async def test_delete_hides_events_at_or_below(self, api: JournalApi, journal_id: str) -> None:
        await api.append(journal_id, events(1, 5))
        await api.settle()
        assert await api.delete(journal_id, 3) == 3
        assert seq_nrs(await api.read(journal_id)) == [4, 5]
        assert await api.info(journal_id) == (5, 3)
        await api.settle()
        assert seq_nrs(await api.read(journal_id)) == [4, 5]

    async def test_delete_is_clamped_to_the_last_seq_nr(
        self, api: JournalApi, journal_id: str
    ) -> None:
        assert await api.delete(journal_id, 10) is None
        await api.append(journal_id, events(1, 2))
        assert await api.delete(journal_id, 10) == 2
        assert await api.read(journal_id) == []
        await api.append(journal_id, events(3, 3))
        assert seq_nrs(await api.read(journal_id)) == [3]
        assert await api.info(journal_id) == (3, 2)

    async def test_purge_removes_everything_and_seq_nrs_restart(
        self, api: JournalApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(1, 4))
        await api.settle()
        await api.delete(journal_id, 1)
        await api.purge(journal_id)
        assert await api.read(journal_id) == []
        assert await api.info(journal_id) == (None, None)
        await api.append(journal_id, events(1, 2))
        assert await api.read(journal_id) == events(1, 2)
        await api.settle()
        assert await api.read(journal_id) == events(1, 2)

    async def test_journals_sharing_a_partition_do_not_mix(
        self, api: JournalApi, journal_id: str
    ) -> None:
        ids = [f"{journal_id}-{n}" for n in range(12)]  # 12 journals over a few partitions
        for n, other in enumerate(ids):
            await api.append(other, events(1, n + 1))
        await api.settle()
        for n, other in enumerate(ids):
            await api.append(other, events(n + 2, n + 2))
        for n, other in enumerate(ids):
            got = seq_nrs(await api.read(other))
            assert got == list(range(1, n + 3)), f"{other}: {got}"

    async def test_concurrent_readers_agree(self, api: JournalApi, journal_id: str) -> None:
        await api.append(journal_id, events(1, 20))
        await api.settle()
        await api.append(journal_id, events(21, 30))
        reads = await asyncio.gather(*(api.read(journal_id) for _ in range(8)))
        assert all(r == events(1, 30) for r in reads)
