"""Snapshots through two workers, each request to the other worker than the last: a worker
that does not own the journal's partition forwards it (a 16 MiB PUT's body included)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from journal.core.model import TextPayload
from tests.journal.journal_contract import events
from tests.journal.snapshot_contract import SnapshotContract
from tests.support.harness import Harness, unique
from tests.support.snapshot_api import HttpSnapshots
from tests.support.workers import WorkerProcess, metric, suite_over

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def api(connected: Harness, workers: list[WorkerProcess]) -> AsyncIterator[HttpSnapshots]:
    """Over both `workers` (tests/app/conftest.py: settled, the partitions split)."""
    store = connected.journals.store
    async with suite_over(HttpSnapshots, workers, connected.settings, store) as api:
        yield api


class TestSnapshotsOverTwoWorkers(SnapshotContract):
    """Half the requests reach a worker that does not own the journal's partition."""


async def test_snapshot_requests_are_forwarded_to_the_owner(
    api: HttpSnapshots, workers: list[WorkerProcess]
) -> None:
    async def forwarded() -> float:
        return sum([await metric(w, "kafka_journal_forwarded_requests_total") for w in workers])

    before = await forwarded()
    journal_id = unique("forwarded")
    await api.append(journal_id, events(1, 2))
    for seq_nr in (1, 2):  # the requests alternate: one of the two workers is not the owner
        await api.put_snapshot(journal_id, seq_nr, TextPayload(f"at {seq_nr}"))
        assert await api.latest_snapshot(journal_id) == (seq_nr, TextPayload(f"at {seq_nr}"))
    await api.delete_snapshots(journal_id, 2)
    assert await api.latest_snapshot(journal_id) is None
    assert await forwarded() >= before + 3
