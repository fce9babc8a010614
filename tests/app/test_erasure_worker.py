"""Encrypted journals through two Faust workers (real servers, docs/erasure.md): payloads are
sealed on the worker's append path (snapshots too), replicated sealed, opened by HTTP reads on
either worker,
and an erasure over HTTP makes the journal 410 `journal_erased` everywhere."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import SecretStr

from app.grow import grow_topic
from journal.client.journals import Journals
from journal.codec.envelope import new_kek_text
from journal.core.grow import Phase
from journal.core.model import Event, JournalKey, JsonPayload, TextPayload
from journal.errors import JournalErased
from journal.kafka.topic import end_offsets
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique
from tests.support.http_api import HttpJournals, client_session, journal_path
from tests.support.raw_bytes import cassandra_bytes, kafka_bytes
from tests.support.workers import WorkerProcess, running_workers

pytestmark = pytest.mark.integration

KEK = new_kek_text()


@pytest.fixture(scope="module")
def settings(stack: Stack, keyspace: str) -> Settings:
    return settings_for(stack, unique("journal_erasure_workers"), keyspace).model_copy(
        update={"kek": SecretStr(KEK)}
    )


@pytest.fixture(scope="module")
async def store(settings: Settings) -> AsyncIterator[CassandraStore]:
    store = await CassandraStore.connect(settings.cassandra_config())  # makes the schema
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(scope="module")
def workers(
    settings: Settings, store: CassandraStore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[WorkerProcess]]:
    with running_workers(settings, tmp_path_factory, 2, env={"KJ_KEK": KEK}) as processes:
        yield processes


@pytest.fixture(scope="module")
async def api(workers: list[WorkerProcess], settings: Settings) -> AsyncIterator[HttpJournals]:
    for worker in workers:
        await worker.wait_ready()
    async with client_session(settings) as session:
        yield HttpJournals(session, [w.url for w in workers])


async def status_and_code(api: HttpJournals, method: str, path: str, **kwargs: object) -> object:
    async with api.session.request(method, api.at(path), **kwargs) as response:  # type: ignore[arg-type]
        body = await response.json()
        return response.status, body.get("error", {}).get("code")


async def test_two_workers_seal_replicate_and_open_and_an_http_erasure_is_final(
    api: HttpJournals, settings: Settings, store: CassandraStore
) -> None:
    marker = f"secret-{uuid.uuid4().hex}"
    journal_id, kept_id = unique("w_erased"), unique("w_kept")
    events = [
        Event(1, payload=JsonPayload.of({"name": marker})),
        Event(2, payload=TextPayload(marker)),
    ]
    kept = [Event(1, payload=TextPayload("kept"))]
    await api.append(journal_id, events)
    await api.append(kept_id, kept)

    key = JournalKey(settings.topic, journal_id)

    async def replicated() -> bool:
        meta = await store.meta(key)
        return meta is not None and meta.seq_nr == 2

    await eventually(replicated, "the workers replicated the journal")
    snapshot_path = journal_path(journal_id, "/snapshots/2")
    await api.request_json("PUT", snapshot_path, json={"payloadText": f"snap-{marker}"})
    for _ in range(2):  # each request to the next worker
        assert await api.read(journal_id) == events
        latest = await api.request_json("GET", journal_path(journal_id, "/snapshots/latest"))
        assert latest["payloadText"] == f"snap-{marker}"
    assert marker.encode() not in await kafka_bytes(settings)
    assert marker.encode() not in cassandra_bytes(store)

    answer = await api.request_json("DELETE", journal_path(journal_id, "/payloads"))
    assert answer["already"] is False and isinstance(answer["offset"], int)

    for _ in range(2):  # each to the next worker: both forward to the owner, which erased
        for method, suffix, body in (
            ("GET", "/events", None),
            ("GET", "", None),
            ("GET", "/snapshots/latest", None),
            ("PUT", "/snapshots/2", {"payloadText": "again"}),
            ("POST", "/events", {"events": [{"seqNr": 3, "payloadText": "x"}]}),
        ):
            path = journal_path(journal_id, suffix)
            answered = await status_and_code(api, method, path, json=body)
            assert answered == (410, "journal_erased"), (method, suffix)
    assert await api.read(kept_id) == kept
    again = await api.request_json("DELETE", journal_path(journal_id, "/payloads"))
    assert again == {"already": True}

    async with await Journals.connect(settings, store=store) as fresh:
        with pytest.raises(JournalErased):
            [r async for r in fresh.journal(journal_id).read()]
    assert marker.encode() not in await kafka_bytes(settings)
    assert marker.encode() not in cassandra_bytes(store)


async def test_a_worker_serves_an_encrypted_journal_across_a_grow_and_erases_it(
    stack: Stack, keyspace: str, store: CassandraStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issues 40 and 44: a worker with a key-encryption key starts on a grown topic (it
    refused before) and serves a journal written in OLD before the grow and appended through
    it after (in NEW): one data key (the chain's first topic's) opens both parts; its erasure
    over HTTP answers 410 from then on and no byte of it is in clear in either topic or the
    store, while another journal reads as before."""
    settings = settings_for(stack, unique("journal_erasure_grow"), keyspace, 1).model_copy(
        update={"kek": SecretStr(KEK)}
    )
    marker = f"secret-{uuid.uuid4().hex}"
    journal_id, kept_id = unique("g_erased"), unique("g_kept")
    before = {journal_id: Event(1, payload=TextPayload(f"{marker}:1"))}
    before[kept_id] = Event(1, payload=TextPayload("kept:1"))
    after = {journal_id: Event(2, payload=JsonPayload.of({"name": marker}))}
    after[kept_id] = Event(2, payload=TextPayload("kept:2"))
    async with await Journals.connect(settings, store=store) as journals:
        for appended_id, event in before.items():
            await journals.journal(appended_id).append([event])
    grow = await grow_topic(settings, store, 2, yes=True)
    assert grow is not None and grow.phase is Phase.DONE
    env = {"KJ_KEK": KEK}
    with running_workers(settings, tmp_path_factory, 1, env=env) as processes:
        await processes[0].wait_ready()
        async with client_session(settings) as session:
            api = HttpJournals(session, [processes[0].url])
            for appended_id, event in after.items():
                await api.append(appended_id, [event])
            assert await end_offsets(settings.kafka_access(), grow.new_topic, 2) != {0: 0, 1: 0}
            for read_id in (journal_id, kept_id):
                assert await api.read(read_id) == [before[read_id], after[read_id]]
            answer = await api.request_json("DELETE", journal_path(journal_id, "/payloads"))
            assert answer["already"] is False
            for method, suffix in (("GET", "/events"), ("GET", "")):
                answered = await status_and_code(api, method, journal_path(journal_id, suffix))
                assert answered == (410, "journal_erased"), (method, suffix)
            assert await api.read(kept_id) == [before[kept_id], after[kept_id]]
    new = settings.model_copy(update={"topic": grow.new_topic, "partitions": 2})
    raw = await kafka_bytes(settings) + await kafka_bytes(new) + cassandra_bytes(store)
    assert marker.encode() not in raw
    async with await Journals.connect(settings, store=store) as fresh:
        with pytest.raises(JournalErased):
            [r async for r in fresh.journal(journal_id).read()]
        kept = [r.event async for r in fresh.journal(kept_id).read()]
        assert kept == [before[kept_id], after[kept_id]]
