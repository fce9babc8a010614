"""The partition count guard in a Faust worker (a real process, real servers): partitions
added behind the project's back refuse the running worker's appends (503
partition_count_changed) and readiness, and a worker started afterwards refuses to start."""

from __future__ import annotations

import asyncio
import subprocess

import aiohttp
import pytest

from journal.client.journals import Journals
from journal.core.model import Ack, Event, TextPayload
from stack import Stack
from tests.support.eventually import eventually
from tests.support.http_api import client_session, journal_path
from tests.support.partitions import (
    ALTERED,
    RECORDED,
    alter_behind_the_back,
    assert_nothing_misplaced,
    guarded_settings,
    records_by_partition,
)
from tests.support.workers import WorkerProcess, running_workers

pytestmark = pytest.mark.integration

REFUSED = f"has {ALTERED} partitions, the journal recorded {RECORDED}"


async def test_a_running_worker_refuses_appends_and_says_why_when_not_ready(
    stack: Stack, keyspace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = guarded_settings(stack, keyspace)
    env = {"KJ_KAFKA_METADATA_MAX_AGE_S": "0.5"}
    with running_workers(settings, tmp_path_factory, count=1, env=env) as (worker,):
        await worker.wait_ready()
        async with client_session(settings) as session:

            async def append(journal_id: str) -> tuple[int, dict[str, object], str | None]:
                body = {"events": [{"seqNr": 1, "payload": {"n": 1}}]}
                url = worker.url.with_path(journal_path(journal_id, "/events"))
                async with session.post(url, json=body, params={"ack": "kafka"}) as answer:
                    return answer.status, await answer.json(), answer.headers.get("Retry-After")

            assert (await append("before"))[0] == 200
            await alter_behind_the_back(settings, ALTERED)
            appended = ["before"]

            async def refused() -> tuple[dict[str, object], str | None] | None:
                journal_id = f"during-{len(appended)}"
                status, body, retry_after = await append(journal_id)
                if status == 200:
                    appended.append(journal_id)
                    return None
                assert status == 503, body
                return body, retry_after

            answered = await eventually(refused, "an append refused", within_s=60)
            assert answered is not None
            body, retry_after = answered
            error = body["error"]
            assert isinstance(error, dict)
            assert error["code"] == "partition_count_changed"
            assert REFUSED in error["message"]
            assert retry_after is not None and int(retry_after) > 0
            async with session.get(worker.url / "readyz") as ready:
                assert ready.status == 503
                readiness = await ready.json()
            assert readiness["error"]["code"] == "partition_count_changed"
            assert REFUSED in readiness["error"]["message"]
        assert REFUSED in worker.log.read_text(errors="replace")  # logged, once it tripped
    found = await records_by_partition(settings, ALTERED)
    assert_nothing_misplaced(found)
    assert sorted(key for keys in found.values() for key in keys) == sorted(appended)


async def test_a_worker_started_after_the_change_refuses_to_start(
    stack: Stack, keyspace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = guarded_settings(stack, keyspace)
    async with await Journals.connect(settings) as journals:  # creates and records the topic
        await journals.journal("before").append([Event(1, payload=TextPayload("x"))], ack=Ack.KAFKA)
    await alter_behind_the_back(settings, ALTERED)
    worker = WorkerProcess(settings, "guard-app", tmp_path_factory.mktemp("w") / "data")
    worker.start()
    try:
        assert worker.process is not None
        code = await asyncio.to_thread(worker.process.wait, 120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not refuse to start:\n{worker.tail()}")
    finally:
        worker.stop()
    assert code == 1, worker.tail()
    assert f"the worker refuses to start: topic {settings.topic} {REFUSED}" in worker.tail()
    with pytest.raises(aiohttp.ClientError):  # it never served
        async with aiohttp.ClientSession() as session, session.get(worker.url / "readyz"):
            pass
    assert_nothing_misplaced(await records_by_partition(settings, ALTERED))
