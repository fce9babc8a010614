"""Two workers on the secured stack: the semantic suite over HTTP, half of it forwarded.

Every path of the journal (append, read, delete, purge, replication by the agents, forwarding
to the owner) runs with each process logged in as its own principal: the workers as
`journal-worker`, the test's client (it waits for replication) as `journal-client` with the
`journal_reader` role.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from journal.client.journals import Journals
from stack import Stack
from tests.journal.journal_contract import JournalContract, events
from tests.support.http_api import HttpJournals
from tests.support.secured import Granted, granted_journal
from tests.support.workers import (
    WorkerProcess,
    metric,
    running_workers,
    suite_over,
    wait_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.secured]


@pytest.fixture(scope="module")
async def granted(secured_stack: Stack) -> Granted:
    return await granted_journal(secured_stack, partitions=4)


@pytest.fixture(scope="module")
async def client(granted: Granted) -> AsyncIterator[Journals]:
    async with await Journals.connect(granted.settings) as journals:
        yield journals


@pytest.fixture(scope="module")
def workers(
    granted: Granted, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[WorkerProcess]]:
    with running_workers(granted.settings, tmp_path_factory, app_id=granted.app_id) as both:
        yield both


@pytest.fixture(scope="module")
async def api(
    granted: Granted, client: Journals, workers: list[WorkerProcess]
) -> AsyncIterator[HttpJournals]:
    await wait_settled(workers)  # both hold partitions: half the requests are forwarded
    async with suite_over(HttpJournals, workers, granted.settings, client.store) as api:
        yield api


class TestTwoSecuredWorkers(JournalContract):
    """Each request goes to the other worker than the last: half are forwarded."""


async def test_both_workers_own_partitions_and_forward_to_each_other(
    api: HttpJournals, workers: list[WorkerProcess], granted: Granted
) -> None:
    async def forwarded() -> float:
        return sum([await metric(w, "kafka_journal_forwarded_requests_total") for w in workers])

    before = await forwarded()
    for n in range(1, 9):
        await asyncio.gather(*(api.append(f"spread-{k}", events(n, n)) for k in range(4)))
    for k in range(4):
        assert [e.seq_nr for e in await api.read(f"spread-{k}")] == list(range(1, 9))
    assert await forwarded() > before
