"""Compressed batches through real worker processes: the agent's Faust consumer and the API.

kafka-journal's reference records in batches of each codec read back over HTTP and replicate;
a worker that cannot decode zstd (tests/support/zstd_unavailable) keeps consuming past a
zstd batch instead of crashing its fetcher, and counts it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from journal.core.model import Event
from journal.kafka.poison import QUARANTINE_SKIPPED_HEADER
from journal.kafka.writer import partition_of
from stack import Stack
from tests.support.compressed import (
    CODECS,
    ZSTD_UNAVAILABLE,
    ids_in_one_partition,
    produce_reference,
    produce_zstd_batch,
    quarantined_headers,
)
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness, unique
from tests.support.http_api import HttpJournals, client_session
from tests.support.workers import WorkerProcess, suite_over

pytestmark = pytest.mark.integration


@pytest.fixture
async def connected(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    async with harness(stack, keyspace, "worker_codecs") as one:
        yield one


@pytest.fixture
def worker(
    connected: Harness, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[WorkerProcess]:
    """A worker of the topic; `@pytest.mark.parametrize("worker", [ZSTD_UNAVAILABLE],
    indirect=True)` starts it with that folder on PYTHONPATH."""
    process = WorkerProcess(connected.settings, unique("app"), tmp_path / "data")
    sitecustomize: Path | None = getattr(request, "param", None)
    with pytest.MonkeyPatch.context() as patch:
        if sitecustomize is not None:
            patch.setenv("PYTHONPATH", os.pathsep.join([str(sitecustomize), os.getcwd()]))
        process.start()
    yield process
    process.stop()


@pytest.fixture
async def api(connected: Harness, worker: WorkerProcess) -> AsyncIterator[HttpJournals]:
    await worker.wait_ready()
    store = connected.journals.store
    async with suite_over(HttpJournals, [worker], connected.settings, store) as api:
        yield api


async def test_batches_of_every_codec_read_back_over_http(
    api: HttpJournals, connected: Harness, vectors: Path
) -> None:
    expected: dict[str, list[Event]] = {}
    for codec in CODECS:
        expected |= await produce_reference(connected.settings, vectors, codec, f"-{codec}")
    assert {journal_id: await api.read(journal_id) for journal_id in expected} == expected
    await api.settle()  # the agent consumed and replicated them
    for journal_id, events in expected.items():
        assert (await connected.stored(journal_id))[1] == [e.seq_nr for e in events]
    assert {journal_id: await api.read(journal_id) for journal_id in expected} == expected


@pytest.mark.parametrize("worker", [ZSTD_UNAVAILABLE], indirect=True)
async def test_a_worker_consumes_past_a_batch_it_cannot_decode(
    api: HttpJournals, connected: Harness, worker: WorkerProcess
) -> None:
    settings = connected.settings
    (victim, bystander), other = ids_in_one_partition(settings.partitions, 2)
    await api.append(victim, [Event(1)])
    await api.append(bystander, [Event(1)])
    poisoned = await produce_zstd_batch(settings, victim, range(2, 5))
    await api.append(bystander, [Event(2)])
    await api.append(other, [Event(1)])
    await api.settle()  # the store's pointers pass the batch: the agent went on
    # and the quarantine says what it went past. Not always before the pointer did: a
    # catch-up from Kafka (at the assignment, or after a failed write) may pass the batch
    # before the agent reaches it (seen under a full test run's load), so wait, bounded
    partition = partition_of(victim, settings.partitions)
    marker = f"{partition}:{poisoned[0]}-{poisoned[-1]}".encode()

    async def skipped() -> list[bytes | None]:
        return [h.get(QUARANTINE_SKIPPED_HEADER) for h in await quarantined_headers(settings)]

    assert await eventually(skipped, "the quarantine names the batch skipped") == [marker]
    assert (await connected.stored(bystander))[1] == [1, 2]
    assert [e.seq_nr for e in await api.read(bystander)] == [1, 2]
    assert [e.seq_nr for e in await api.read(other)] == [1]
    assert [e.seq_nr for e in await api.read(victim)] == [1]  # 2..4 could not be decoded
    async with client_session(settings) as session, session.get(worker.url / "metrics") as got:
        text = await got.text()
    assert f'kafka_journal_poison_batches_total{{topic="{settings.topic}"}} 1' in text
    assert worker.process is not None and worker.process.poll() is None
