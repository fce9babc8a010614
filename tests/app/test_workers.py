"""Two workers share the partitions: the suite round robin over both, forwarding, failover."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from tests.journal.journal_contract import JournalContract, events
from tests.support.eventually import answered
from tests.support.harness import Harness
from tests.support.http_api import HttpError, HttpJournals
from tests.support.workers import WorkerProcess, metric, suite_over

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def api(connected: Harness, workers: list[WorkerProcess]) -> AsyncIterator[HttpJournals]:
    """Over both `workers` (tests/app/conftest.py: settled, the partitions split)."""
    store = connected.journals.store
    async with suite_over(HttpJournals, workers, connected.settings, store) as api:
        yield api


class TestTwoWorkers(JournalContract):
    """Each request goes to the other worker than the last: half are forwarded."""


async def test_requests_are_forwarded_to_the_owner_and_read_from_its_tables(
    api: HttpJournals, workers: list[WorkerProcess]
) -> None:
    forwarded = [await metric(w, "kafka_journal_forwarded_requests_total") for w in workers]
    for n in range(1, 9):
        await api.append("spread", events(n, n))
        assert [e.seq_nr for e in await api.read("spread")] == list(range(1, n + 1))
    after = [await metric(w, "kafka_journal_forwarded_requests_total") for w in workers]
    assert sum(after) > sum(forwarded)
    # every read was answered by the owner, from its tables or its store, never by a scan
    owner_paths = (
        'kafka_journal_reads_total{path="index"}',
        'kafka_journal_reads_total{path="store"}',
    )
    assert sum([await metric(w, p) for w in workers for p in owner_paths]) >= 8
    scans = 'kafka_journal_reads_total{path="scan_not_owner"}'
    assert sum([await metric(w, scans) for w in workers]) == 0


async def test_a_worker_leaving_hands_its_partitions_over(
    api: HttpJournals, workers: list[WorkerProcess]
) -> None:
    """Stop one worker while requests keep coming; the other answers them all."""
    await api.append("failover", events(1, 5))
    workers[1].stop()
    survivor = HttpJournals(api.session, [workers[0].url])
    for n in range(6, 16):
        # 503 (rebalancing) or a refused forward: retried as a client would
        await answered(
            lambda n=n: survivor.append("failover", events(n, n)),  # type: ignore[misc]
            f"the survivor appends {n}",
            retry_on=(HttpError, aiohttp.ClientError),
        )
    assert [e.seq_nr for e in await survivor.read("failover")] == list(range(1, 16))
