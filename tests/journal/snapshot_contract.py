"""The semantic suite of snapshots: the direct client and HTTP pass it.

A subclass provides the `api` fixture (a tests.support.snapshot_api.SnapshotApi). Between
steps `api.settle()` lets replication run; where the subclass replicates only then (the
direct client), what comes before it is a Purge the store has not seen.
"""

from __future__ import annotations

import uuid

import pytest

from journal.core.model import BinaryPayload, JsonPayload, TextPayload
from journal.errors import SnapshotBeyondJournal, SnapshotTooLarge
from tests.journal.journal_contract import events
from tests.support.snapshot_api import SnapshotApi

SIX = JsonPayload.of({"state": "at six"})


class SnapshotContract:
    @pytest.fixture
    def journal_id(self) -> str:
        return f"s-{uuid.uuid4().hex[:12]}"

    async def test_latest_is_the_newest_at_or_below(
        self, api: SnapshotApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(1, 9))
        three, six, nine = JsonPayload.of([1, None]), TextPayload("six"), BinaryPayload(b"\x00\xff")
        await api.put_snapshot(journal_id, 3, three)
        await api.put_snapshot(journal_id, 9, nine)
        await api.put_snapshot(journal_id, 6, six)
        assert await api.latest_snapshot(journal_id) == (9, nine)
        assert await api.latest_snapshot(journal_id, 8) == (6, six)
        assert await api.latest_snapshot(journal_id, 3) == (3, three)
        assert await api.latest_snapshot(journal_id, 2) is None
        await api.settle()
        assert await api.latest_snapshot(journal_id, 8) == (6, six)

    async def test_an_unknown_journal_has_none(self, api: SnapshotApi, journal_id: str) -> None:
        assert await api.latest_snapshot(journal_id) is None

    async def test_a_put_replaces_the_one_at_its_seq_nr(
        self, api: SnapshotApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(1, 2))
        await api.put_snapshot(journal_id, 2, TextPayload("first"))
        await api.put_snapshot(journal_id, 2, TextPayload("second"))
        assert await api.latest_snapshot(journal_id) == (2, TextPayload("second"))

    async def test_a_snapshot_beyond_the_journal_is_refused(
        self, api: SnapshotApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(1, 2))
        with pytest.raises(SnapshotBeyondJournal) as refused:
            await api.put_snapshot(journal_id, 3, SIX)
        assert refused.value.seq_nr == 2
        assert await api.latest_snapshot(journal_id) is None

    async def test_delete_removes_up_to_its_seq_nr(self, api: SnapshotApi, journal_id: str) -> None:
        await api.append(journal_id, events(1, 9))
        for seq_nr in (3, 6, 9):
            await api.put_snapshot(journal_id, seq_nr, JsonPayload.of(seq_nr))
        await api.delete_snapshots(journal_id, 6)
        assert await api.latest_snapshot(journal_id) == (9, JsonPayload.of(9))
        assert await api.latest_snapshot(journal_id, 8) is None
        await api.put_snapshot(journal_id, 3, JsonPayload.of("again"))  # a later put counts
        assert await api.latest_snapshot(journal_id, 8) == (3, JsonPayload.of("again"))

    async def test_a_purge_removes_them_and_none_comes_back_when_the_journal_restarts(
        self, api: SnapshotApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(1, 6))
        await api.put_snapshot(journal_id, 6, SIX)
        await api.settle()
        await api.purge(journal_id)
        assert await api.latest_snapshot(journal_id) is None
        await api.append(journal_id, events(1, 7))  # past 6 again, from 1
        assert await api.latest_snapshot(journal_id) is None
        await api.settle()
        assert await api.latest_snapshot(journal_id) is None
        await api.put_snapshot(journal_id, 5, TextPayload("after"))
        assert await api.latest_snapshot(journal_id) == (5, TextPayload("after"))

    async def test_a_payload_of_the_limit_is_stored_and_one_byte_more_refused(
        self, api: SnapshotApi, journal_id: str
    ) -> None:
        await api.append(journal_id, events(1, 1))
        limit = api.max_snapshot_bytes
        whole = BinaryPayload(bytes(range(256)) * (limit // 256) + b"\x01" * (limit % 256))
        await api.put_snapshot(journal_id, 1, whole)
        assert await api.latest_snapshot(journal_id) == (1, whole)
        with pytest.raises(SnapshotTooLarge):
            await api.put_snapshot(journal_id, 1, TextPayload("x" * (limit + 1)))
        assert await api.latest_snapshot(journal_id) == (1, whole)
