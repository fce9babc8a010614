"""A worker replicates the partitions it is assigned while its tables still recover (issue 43):
their catch-ups start at the assignment, beside the tables' restore and Faust's recovery, not
once both are done, and follow what is appended meanwhile.

The recovery is held for real: the restarted worker's Faust client (its own client id) gets a
fetch quota of one byte a second from Kafka, with the worker's own restore ahead off, so
Faust's recovery of its changelogs crawls until the test lifts the quota. The catch-ups'
consumers have another client id and are not held.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import aiohttp
import pytest

from journal.kafka.topic import end_offsets
from stack import Stack
from stack.jars import classpath, classpath_arg
from stack.java import find_java
from stack.kafka import KafkaServer
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import Harness, unique
from tests.support.workers import WorkerProcess, wait_replicated

pytestmark = pytest.mark.integration

HELD = "kj-held-recovery"  # the restarted worker's Faust client id (Faust reads BROKER_CLIENT_ID)


def _fetch_quota(stack: Stack, client_id: str, bytes_per_s: int | None) -> None:
    """Set (or with None, remove) a client id's fetch quota, with Kafka's own tool."""
    settings = stack.settings
    java = find_java(settings.java, KafkaServer.accepted_java)
    jars = classpath("kafka", settings.jar_cache, stack.progress)
    change = (
        ["--delete-config", "consumer_byte_rate"]
        if bytes_per_s is None
        else ["--add-config", f"consumer_byte_rate={bytes_per_s}"]
    )
    command = [
        java, "-cp", classpath_arg(jars), "kafka.admin.ConfigCommand",
        "--bootstrap-server", stack.settings.kafka_access.bootstrap, "--alter",
        "--entity-type", "clients", "--entity-name", client_id, *change,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


async def _ready(worker: WorkerProcess) -> bool:
    async with (
        aiohttp.ClientSession() as session,
        session.get(worker.url / "readyz") as answer,
    ):
        return answer.status == 200


@pytest.mark.timeout(600)  # a worker's stops and starts, and Kafka's tool run four times
async def test_a_restarted_worker_replicates_its_partitions_while_its_tables_still_recover(
    stack: Stack, connected: Harness, tmp_path: Path
) -> None:
    settings = connected.settings
    app_id = unique("held")
    first = WorkerProcess(settings, app_id, tmp_path / "first" / "data")
    first.start()
    try:
        await first.wait_ready()
        # its tables' changelogs get several batches per partition: Faust's recovery of them
        # takes several fetches, each held by the quota
        await asyncio.gather(
            *(connected.journals.journal(f"old-{n}").append(events(1, 1)) for n in range(300))
        )
        await wait_replicated(settings, connected.store)
    finally:
        first.stop()
    # appended while no worker runs: only the restarted worker can replicate them
    await asyncio.gather(
        *(connected.journals.journal(f"new-{n}").append(events(1, 1)) for n in range(12))
    )
    ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
    await asyncio.to_thread(_fetch_quota, stack, HELD, 1)
    restarted = WorkerProcess(
        settings,
        app_id,
        tmp_path / "restarted" / "data",  # no local state: every table is recovered
        env={
            "BROKER_CLIENT_ID": HELD,
            "CONSUMER_MAX_FETCH_SIZE": "1024",  # a fetch per batch (Kafka gives one at least)
            "KJ_RESTORE_AHEAD_MIN": str(10**9),  # Faust's recovery alone: the held one
        },
    )
    try:
        restarted.start()

        async def replicated_before_ready() -> bool:
            for partition, end in ends.items():
                pointer = await connected.store.pointer(settings.topic, partition)
                assert pointer is not None and pointer >= end - 1, (partition, pointer, end)
            return True

        # the hold lasts until the test lifts it, so a slow host's start only takes longer here
        await eventually(replicated_before_ready, "the store's pointers at the ends", 180.0)
        # the tables still recover: the worker is not ready, and it caught up all the same
        assert not await _ready(restarted), "recovered before the check: the hold did not hold"
        # appended while they still recover: followed from Kafka at once, not at the restore's end
        await asyncio.gather(
            *(connected.journals.journal(f"later-{n}").append(events(1, 1)) for n in range(12))
        )
        ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
        await eventually(replicated_before_ready, "the store's pointers at the later ends", 180.0)
        assert not await _ready(restarted), "recovered before the check: the hold did not hold"
    finally:
        await asyncio.to_thread(_fetch_quota, stack, HELD, None)
        try:
            await restarted.wait_ready()  # once released, its recovery ends
        finally:
            restarted.stop()
