"""A worker killed -9 in the middle of an HTTP erasure (docs/erasure.md, "Erasing"), on the
real servers: whatever step the kill lands at, the erasure is either done or reported not done,
never half (a key destroyed while its journal still reads, or the journal purged and reported
erased with its key still there); erasing again on the surviving worker finishes it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from journal.client.journals import Journals
from journal.codec.envelope import new_kek_text
from journal.errors import JournalErased
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from journal.store.keys import KeyState
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import settings_for, unique
from tests.support.http_api import client_session, journal_path
from tests.support.raw_bytes import kafka_bytes
from tests.support.raw_store import keyspace_of, session_of
from tests.support.workers import WorkerProcess, metric, running_workers, wait_settled

pytestmark = pytest.mark.integration

KEK = new_kek_text()
# a survivor takes the dead owner's partition over within seconds
QUICK_SESSION = {"BROKER_SESSION_TIMEOUT": "6", "BROKER_HEARTBEAT_INTERVAL": "1"}


@pytest.fixture(scope="module")
def settings(stack: Stack, keyspace: str) -> Settings:
    # two partitions: the workers split them (one each), so the group settles before the test
    return settings_for(stack, unique("journal_erasure_kill"), keyspace, partitions=2).model_copy(
        update={"kek": SecretStr(KEK)}
    )


@pytest.fixture(scope="module")
async def store(settings: Settings) -> AsyncIterator[CassandraStore]:
    store = await CassandraStore.connect(settings.cassandra_config())  # makes the schema
    try:
        yield store
    finally:
        await store.close()


def key_row(store: CassandraStore, settings: Settings, journal_id: str) -> tuple[str, bool]:
    """The key row's state and whether it still holds the wrapped key."""
    row = (
        session_of(store)
        .execute(
            f"SELECT state, wrapped FROM {keyspace_of(store)}.journal_keys "
            "WHERE topic = %s AND id = %s",
            (settings.topic, journal_id),
        )
        .one()
    )
    assert row is not None
    return row.state, row.wrapped is not None


async def fresh_read(settings: Settings, store: CassandraStore, journal_id: str) -> object:
    """What a process that never cached the key reads: the events, or JournalErased."""
    async with await Journals.connect(settings, store=store) as fresh:
        try:
            return [r async for r in fresh.journal(journal_id).read()]
        except JournalErased as error:
            return error


async def test_a_worker_killed_during_an_erasure_leaves_it_done_or_not_done_never_half(
    settings: Settings, store: CassandraStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    marker = f"secret-{uuid.uuid4().hex}"
    journal_id = unique("killed_erasure")
    events_body = {"events": [{"seqNr": 1, "payloadText": marker}], "expectedSeqNr": 0}
    env = {"KJ_KEK": KEK, **QUICK_SESSION}
    with running_workers(settings, tmp_path_factory, 2, env=env) as workers:
        await wait_settled(workers)
        async with client_session(settings) as session:

            async def call(
                worker: WorkerProcess, method: str, suffix: str, **kw: Any
            ) -> tuple[int, Any]:
                url = worker.url.with_path(journal_path(journal_id, suffix), encoded=True)
                async with session.request(method, url, **kw) as answer:
                    return answer.status, await answer.json()

            status, _ = await call(workers[0], "POST", "/events", json=events_body)
            assert status == 200
            # the conditional append's verdict is taken by the partition's owner
            verdicts = "kafka_journal_conditional_verdicts_total"
            owners = [w for w in workers if await metric(w, verdicts) > 0]
            assert len(owners) == 1, "no single worker took the verdict"
            (owner,) = owners
            (survivor,) = [w for w in workers if w is not owner]

            # the erasure starts on the owner; it dies once the mark is down (or it finished)
            erasing = asyncio.ensure_future(call(owner, "DELETE", "/payloads"))

            async def marked() -> bool:
                return erasing.done() or key_row(store, settings, journal_id)[0] != "active"

            await eventually(marked, "the owner marks the journal erasing", interval_s=0.005)
            owner.kill9()
            await asyncio.gather(erasing, return_exceptions=True)  # a dropped connection

            state, has_key = key_row(store, settings, journal_id)
            print(f"killed at: state {state}, wrapped key kept: {has_key}")  # which step it hit
            # never half: erased means the key is gone; erasing keeps it and is reported not
            # done; and in both the journal reads as erased, never its events
            assert (state, has_key) in (("erasing", True), ("erased", False))
            assert isinstance(await fresh_read(settings, store, journal_id), JournalErased)
            async with await Journals.connect(settings, store=store) as fresh:
                expected = KeyState.ERASING if state == "erasing" else KeyState.ERASED
                assert await fresh.journal(journal_id).erasure_state() is expected

            async def erased_again() -> tuple[int, Any]:
                status, body = await call(survivor, "DELETE", "/payloads")
                assert status != 503, f"no owner took over: {body}"
                return status, body

            status, body = await eventually(erased_again, "the survivor finishes the erasure")
            assert status == 200, body
            assert body["already"] is (state == "erased")
            assert key_row(store, settings, journal_id) == ("erased", False)
            for suffix in ("/events", ""):
                status, body = await call(survivor, "GET", suffix)
                assert (status, body["error"]["code"]) == (410, "journal_erased")
            assert isinstance(await fresh_read(settings, store, journal_id), JournalErased)
    assert marker.encode() not in await kafka_bytes(settings)
