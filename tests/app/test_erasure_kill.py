"""A worker killed -9 in the middle of HTTP erasures (docs/erasure.md, "Erasing"), on the
real servers: whatever step the kill lands at, the erasure is either done or reported not done,
never half (a key destroyed while its journal still reads, or the journal purged and reported
erased with its key still there); erasing again on the surviving worker finishes it."""

from __future__ import annotations

import asyncio
import collections
import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from journal.client.journals import Journals
from journal.codec.envelope import new_kek_text
from journal.errors import JournalErased
from journal.kafka.writer import partition_of
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


def any_marked(store: CassandraStore, settings: Settings, ids: list[str]) -> bool:
    """Whether any of the journals' key rows left `active`."""
    return any(key_row(store, settings, i)[0] != "active" for i in ids)


async def fresh_read(settings: Settings, store: CassandraStore, journal_id: str) -> object:
    """What a process that never cached the key reads: the events, or JournalErased."""
    async with await Journals.connect(settings, store=store) as fresh:
        try:
            return [r async for r in fresh.journal(journal_id).read()]
        except JournalErased as error:
            return error


JOURNALS = 12  # erased at once: the kill lands at several steps of theirs, not only after


async def test_a_worker_killed_during_an_erasure_leaves_it_done_or_not_done_never_half(
    settings: Settings, store: CassandraStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    marker = f"secret-{uuid.uuid4().hex}"
    first = unique("killed_erasure")
    partition = partition_of(first, settings.partitions)
    candidates = (unique("killed_erasure") for _ in itertools.count())
    on_it = (i for i in candidates if partition_of(i, settings.partitions) == partition)
    ids = [first, *itertools.islice(on_it, JOURNALS - 1)]  # all on the first one's partition
    env = {"KJ_KEK": KEK, **QUICK_SESSION}
    with running_workers(settings, tmp_path_factory, 2, env=env) as workers:
        await wait_settled(workers)
        async with client_session(settings) as session:

            async def call(
                worker: WorkerProcess, method: str, journal_id: str, suffix: str, **kw: Any
            ) -> tuple[int, Any]:
                url = worker.url.with_path(journal_path(journal_id, suffix), encoded=True)
                async with session.request(method, url, **kw) as answer:
                    return answer.status, await answer.json()

            for journal_id in ids:
                body = {"events": [{"seqNr": 1, "payloadText": marker}], "expectedSeqNr": 0}
                assert (await call(workers[0], "POST", journal_id, "/events", json=body))[0] == 200
            # a conditional append's verdict is taken by the partition's owner
            verdicts = "kafka_journal_conditional_verdicts_total"
            owners = [w for w in workers if await metric(w, verdicts) > 0]
            assert len(owners) == 1, "no single worker took the verdicts"
            (owner,) = owners
            (survivor,) = [w for w in workers if w is not owner]

            # the erasures start on the owner together; it dies once the first is marked, the
            # others in flight (the rows are asked off the loop, so the requests flow meanwhile)
            erasing = [
                asyncio.ensure_future(call(owner, "DELETE", journal_id, "/payloads"))
                for journal_id in ids
            ]

            async def marked() -> bool:
                return await asyncio.to_thread(any_marked, store, settings, ids)

            await eventually(marked, "the owner marks a journal erasing", interval_s=0.001)
            owner.kill9()
            await asyncio.gather(*erasing, return_exceptions=True)  # dropped connections

            states = {i: key_row(store, settings, i) for i in ids}
            print(f"killed at: {sorted(collections.Counter(states.values()).items())}")
            for journal_id, (state, has_key) in states.items():
                # never half: erased means the key is gone; erasing keeps it and is reported
                # not done, reading as erased; not begun, it reads its events still
                assert (state, has_key) in (
                    ("active", True),
                    ("erasing", True),
                    ("erased", False),
                ), journal_id
                read = await fresh_read(settings, store, journal_id)
                if state == "active":
                    assert isinstance(read, list) and len(read) == 1
                else:
                    assert isinstance(read, JournalErased)
                async with await Journals.connect(settings, store=store) as fresh:
                    assert await fresh.journal(journal_id).erasure_state() is KeyState(state)

            for journal_id in ids:

                async def erased_again(journal_id: str = journal_id) -> tuple[int, Any]:
                    status, body = await call(survivor, "DELETE", journal_id, "/payloads")
                    assert status != 503, f"no owner took over: {body}"
                    return status, body

                status, body = await eventually(erased_again, "the survivor erases")
                assert status == 200, body
                assert body["already"] is (states[journal_id][0] == "erased")
                assert key_row(store, settings, journal_id) == ("erased", False)
                for suffix in ("/events", ""):
                    status, body = await call(survivor, "GET", journal_id, suffix)
                    assert (status, body["error"]["code"]) == (410, "journal_erased")
                assert isinstance(await fresh_read(settings, store, journal_id), JournalErased)
    assert marker.encode() not in await kafka_bytes(settings)
