"""Static group membership is on by default (issue 43): two workers started as the README
starts them (no `--instance-id`), one killed -9 and restarted at once, serve again without a
rebalance: the restarted worker takes its own partitions back (the group's generation does
not move: the other worker sees no rebalance) and an append and a read through it succeed.
With dynamic membership the restart started a rebalance that waited for the dead member's
session to expire (60 s then).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import aiohttp
import pytest

from app.settings import WorkerSettings
from journal.kafka import partition_of
from tests.support.eventually import eventually
from tests.support.harness import Harness, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import WorkerProcess, metric, running_workers, wait_settled

REBALANCES = "kafka_journal_faust_rebalances_total"
SESSION = {"KJ_SESSION_TIMEOUT_S": "90"}


def test_a_worker_is_a_static_member_by_default_with_a_stable_id() -> None:
    settings = WorkerSettings(web_port=6070)
    assert settings.group_instance_id == f"{socket.gethostname()}-6070"
    assert WorkerSettings(web_port=6070).group_instance_id == settings.group_instance_id
    assert WorkerSettings(web_port=6071).group_instance_id != settings.group_instance_id
    assert WorkerSettings(instance_id="w-1").group_instance_id == "w-1"
    assert WorkerSettings(static_membership=False).group_instance_id is None


async def _status(session: aiohttp.ClientSession, worker: WorkerProcess) -> dict[str, Any]:
    async with session.get(worker.url / "status") as got:
        assert got.status == 200, await got.text()
        status: dict[str, Any] = await got.json()
        return status


async def _owned(session: aiohttp.ClientSession, worker: WorkerProcess) -> list[int]:
    return [p["partition"] for p in (await _status(session, worker))["partitions"]]


@pytest.mark.integration
async def test_a_worker_killed_and_restarted_serves_its_partitions_without_a_rebalance(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = connected.settings
    # as the README starts them: the worker's own default membership; its session long enough
    # for a restart on a loaded CI host (the default 30 s is a production host's)
    with running_workers(
        settings, tmp_path_factory, static_membership="default", env=SESSION
    ) as workers:
        await wait_settled(workers)
        survivor, victim = workers
        async with client_session(settings) as session:
            owned = await eventually(lambda: _owned(session, victim), "the victim owns some")
            journal_id = next(
                j
                for j in (unique("static") for _ in range(1000))
                if partition_of(j, settings.partitions) in owned
            )
            rebalances = await metric(survivor, REBALANCES)

            victim.kill9()
            killed = time.monotonic()
            victim.start()

            async def served() -> bool:
                path = journal_path(journal_id, "/events")
                body = {"events": [{"seqNr": 1, "payload": {"back": True}}]}
                async with session.post(victim.url.with_path(path), json=body) as appended:
                    # 409: an earlier try took effect (its answer was lost): the read shows it
                    assert appended.status in (200, 409), await appended.text()
                async with session.get(victim.url.with_path(path)) as read:
                    assert read.status == 200, await read.text()
                    return b'"back"' in await read.read()

            await eventually(  # refused, or dropped, until it listens again
                served,
                "an append and a read through the restarted worker",
                retry_on=(aiohttp.ClientError,),
            )
            waited_s = time.monotonic() - killed

            async def same_partitions() -> bool:
                return await _owned(session, victim) == owned

            # /status lists a partition once its replication reported on it
            await eventually(same_partitions, f"the restarted worker owns {owned} again")
            # the group never rebalanced: the survivor took part in no rebalance since the kill
            assert await metric(survivor, REBALANCES) == rebalances
            print(f"served again {waited_s:.1f} s after the kill -9")
