"""Snapshots through a Faust worker's HTTP API (one worker, real servers): the snapshot
suite, at the default 16 MiB limit, whose PUT body (base64) is beyond the API's body limit."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.journal.journal_contract import events
from tests.journal.snapshot_contract import SnapshotContract
from tests.support.harness import Harness, unique
from tests.support.http_api import journal_path
from tests.support.snapshot_api import HttpSnapshots
from tests.support.workers import WorkerProcess, running_workers, suite_over

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def worker(connected: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_workers(connected.settings, tmp_path_factory, 1) as [process]:
        yield process


@pytest.fixture(scope="module")
async def api(connected: Harness, worker: WorkerProcess) -> AsyncIterator[HttpSnapshots]:
    await worker.wait_ready()
    store = connected.journals.store
    async with suite_over(HttpSnapshots, [worker], connected.settings, store) as api:
        yield api


class TestSnapshotsOverHttp(SnapshotContract):
    """The agent replicates on its own: `settle()` waits for it."""


async def test_a_body_past_the_snapshot_limit_is_413_before_it_is_read(
    api: HttpSnapshots,
) -> None:
    journal_id = unique("huge")
    await api.append(journal_id, events(1, 1))
    url = api.at(journal_path(journal_id, "/snapshots/1"))
    declared = {"Content-Type": "application/json", "Content-Length": str(30 * 2**20)}

    async def nothing_sent() -> AsyncIterator[bytes]:
        yield b"{"

    async with api.session.put(url, data=nothing_sent(), headers=declared) as response:
        body = await response.json()
    assert (response.status, body["error"]["code"]) == (413, "body_too_large")
