"""`kafka-journal topic grow --partitions M` (app/grow.py) against the real servers: the plan,
NEW, one cut per old partition at its first Seal, resumed after a failure at every step and
after kill -9 of the command; and what it refuses."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiokafka import TopicPartition
from pydantic import SecretStr

from app.confirm import REFUSED_EXIT, UNAVAILABLE_EXIT
from app.grow import GrowRefused, grow_topic
from app.worker import _check_recorded as check_worker_start
from journal.client.journals import Journals
from journal.codec import new_kek_text
from journal.core.grow import SEAL_AFTER_LEASES, SEAL_ID, Grow, Phase, Step
from journal.core.model import Ack, Event, TextPayload
from journal.errors import GrownTopicConfigured
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.topic import end_offsets, partition_count
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.harness import settings_for, unique
from tests.support.workers import REPO

pytestmark = pytest.mark.integration


@dataclass
class Old:
    journals: Journals
    store: CassandraStore
    settings: Settings


@pytest.fixture(scope="module")
async def store(stack: Stack, keyspace: str) -> AsyncIterator[CassandraStore]:
    """One connection for the module (the keyspace's schema made once)."""
    settings = settings_for(stack, "unused", keyspace)
    connected = await CassandraStore.connect(settings.cassandra_config())
    yield connected
    await connected.close()


@pytest.fixture
async def old(stack: Stack, keyspace: str, store: CassandraStore) -> AsyncIterator[Old]:
    """A fresh topic of 3 partitions with a few journals in each partition; a short lease, so
    the command's many resumed runs wait little before their first Seal (the client's reads of
    the registry are what a lease saves, not what these tests check)."""
    settings = settings_for(stack, unique("journal_grow"), keyspace, 3).replace(grow_lease_s=0.05)
    async with await Journals.connect(settings, store=store) as journals:
        for n in range(12):
            event = [Event(1, payload=TextPayload(f"e{n}"))]
            await journals.journal(f"j{n}").append(event, ack=Ack.KAFKA)
        yield Old(journals, store, settings)


async def seals_of(old: Old, partitions: int = 3) -> dict[int, list[int]]:
    """The offsets of every Seal in each old partition (the log, read to its end)."""
    settings = old.settings
    kafka = settings.kafka_access()
    ends = await end_offsets(kafka, settings.topic, partitions)
    consumer = await start_consumer(kafka)
    try:
        found: dict[int, list[int]] = {p: [] for p in range(partitions)}
        for p in range(partitions):
            tp = TopicPartition(settings.topic, p)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            while await consumer.position(tp) < ends[p]:
                batch = await consumer.getmany(tp, timeout_ms=10_000)
                assert batch, f"partition {p} not read to its end"
                found[p] += [m.offset for m in batch[tp] if m.key == SEAL_ID.encode()]
        return found
    finally:
        await stop_consumer(consumer)


async def assert_grown(old: Old, partitions: int = 6) -> Grow:
    """Done: NEW exists with M partitions and its count recorded; each cut is its
    partition's first Seal, at or after the end recorded before sealing."""
    grow = await old.store.grow(old.settings.topic)
    assert grow is not None and grow.phase is Phase.DONE
    assert grow.new_topic == f"{old.settings.topic}.{partitions}"
    kafka = old.settings.kafka_access()
    assert await partition_count(kafka, grow.new_topic) == partitions
    assert await old.store.recorded_partitions(grow.new_topic, 99) == partitions
    seals = await seals_of(old)
    assert grow.cut == {p: seals[p][0] for p in range(3)}
    assert all(grow.low[p] <= grow.cut[p] for p in range(3))
    return grow


async def test_a_grow_cuts_each_partition_at_its_first_seal(old: Old) -> None:
    said: list[str] = []
    assert await grow_topic(old.settings, old.store, 6, dry_run=True, say=said.append) is None
    assert "next step: plan" in said[0] and said[0].endswith("/2: OPEN")
    assert await old.store.grow(old.settings.topic) is None  # a dry run changes nothing
    await grow_topic(old.settings, old.store, 6, yes=True, say=said.append)
    grow = await assert_grown(old)
    assert {p: len(s) for p, s in (await seals_of(old)).items()} == {0: 1, 1: 1, 2: 1}
    said.clear()
    again = await grow_topic(old.settings, old.store, 6, yes=True, say=said.append)
    assert again == grow and "next step: finished" in said[0]  # nothing more to do
    # what a worker's start runs: it moves onto the grown topic (the grow is done)
    on = await check_worker_start(old.settings, 3)
    assert (on.topic, on.partitions) == (grow.new_topic, 6)
    # one data key per journal across the chain (`key_identity`): an encrypting one too
    await check_worker_start(old.settings.replace(kek=SecretStr(new_kek_text())), 3)
    # configured with the grown topic, a worker or a client refuses: it would read the
    # journals moved there without their history before the move
    grown = old.settings.replace(topic=grow.new_topic, partitions=6)
    configure_the_first = f"configure {old.settings.topic}, the first topic of its chain"
    with pytest.raises(GrownTopicConfigured, match=configure_the_first):
        await check_worker_start(grown, 6)
    with pytest.raises(GrownTopicConfigured, match=configure_the_first):
        await Journals.connect(grown, store=old.store)


async def test_the_first_seal_comes_leases_after_the_plan(old: Old) -> None:
    """Clients take a registry read without a grow as a lease (`KJ_GROW_LEASE_S`): the command
    seals only `SEAL_AFTER_LEASES` leases after its plan, so those leases end first. A lease
    longer than creating the new topic takes, so the wait is the command's, not the servers'."""
    settings = old.settings.replace(grow_lease_s=2.0)
    sealed_at: list[float] = []
    started = time.monotonic()  # before the plan: the bound below holds on any machine

    def say(line: str) -> None:
        if ": sealed at offset" in line:
            sealed_at.append(time.monotonic())

    await grow_topic(settings, old.store, 6, yes=True, say=say)
    assert len(sealed_at) == 3
    assert sealed_at[0] - started >= SEAL_AFTER_LEASES * settings.grow_lease_s


async def test_a_run_failing_before_any_step_resumes_from_the_registry_and_the_log(
    old: Old,
) -> None:
    """Fail before step 1, run again and fail before step 2, ...: each run starts over from
    the registry and the log only, and the last one finishes the grow."""
    failed_at: list[str] = []
    for _ in range(20):
        count = 0

        def fail_at_the_next_new_step(step: Step) -> None:
            nonlocal count
            count += 1
            if count > 1:  # one step per run: then it "dies" before the next
                failed_at.append(str(step))
                raise RuntimeError("injected")

        try:
            await grow_topic(
                old.settings, old.store, 6, yes=True, before_step=fail_at_the_next_new_step
            )
            break
        except RuntimeError:
            continue
    per_partition = [(f"mark_low {p}", f"seal {p}", f"record_cut {p}") for p in range(3)]
    # every step but the plan was the first of a run that had just died
    assert failed_at == ["create", *(s for three in per_partition for s in three), "done"]
    await assert_grown(old)
    assert {p: len(s) for p, s in (await seals_of(old)).items()} == {0: 1, 1: 1, 2: 1}


async def test_a_second_seal_changes_no_cut(old: Old) -> None:
    """A run killed after producing its Seal but before the log showed it to the next run: the
    next run's Seal is a second one, and the first one is the cut."""
    topic = old.settings.topic

    def stop_before_recording(step: Step) -> None:
        if step.action == "record_cut":
            raise RuntimeError("injected")

    with pytest.raises(RuntimeError):
        await grow_topic(old.settings, old.store, 6, yes=True, before_step=stop_before_recording)
    await old.journals.writer.seal(topic, 0)  # as a killed run's Seal would be
    await grow_topic(old.settings, old.store, 6, yes=True)
    grow = await assert_grown(old)
    seals = await seals_of(old)
    assert len(seals[0]) == 2 and grow.cut[0] == seals[0][0]


async def test_it_refuses_a_count_that_is_not_a_multiple_or_not_the_recorded_one(
    old: Old,
) -> None:
    with pytest.raises(GrowRefused, match="multiple of 3 only"):
        await grow_topic(old.settings, old.store, 4, yes=True)

    def stop(step: Step) -> None:
        if step.action == "mark_low":
            raise RuntimeError("injected")

    with pytest.raises(RuntimeError):
        await grow_topic(old.settings, old.store, 6, yes=True, before_step=stop)
    with pytest.raises(GrowRefused, match="run it again with --partitions 6"):
        await grow_topic(old.settings, old.store, 9, yes=True)


async def kill_once_partition_0_is_cut(args: list[str], env: dict[str, str]) -> bool:
    """Run the command and kill -9 it once it printed partition 0's cut (1 and 2 are not);
    False if it exited 75 before."""
    command = await asyncio.create_subprocess_exec(
        *args, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert command.stdout is not None and command.stderr is not None
    try:
        async with asyncio.timeout(120):
            while b"/0: cut at offset" not in (line := await command.stdout.readline()):
                if not line:
                    why = await command.stderr.read()
                    if await command.wait() == UNAVAILABLE_EXIT:
                        return False
                    pytest.fail(f"ended before cutting partition 0: {why!r}")
        return True
    finally:
        if command.returncode is None:
            os.kill(command.pid, signal.SIGKILL)
        await command.wait()


async def run_again(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """The command, run again while it exits 75 (Kafka or Cassandra did not answer: the
    shared test servers are slow at times), three times at most."""
    for _ in range(3):
        done = await asyncio.to_thread(
            subprocess.run, args, cwd=REPO, capture_output=True, timeout=120
        )
        if done.returncode != UNAVAILABLE_EXIT:
            break
    return done


async def test_the_command_killed_mid_move_and_run_again_finishes(old: Old) -> None:
    s = old.settings
    args = [sys.executable, "-m", "app.cli", "topic", "grow", "--partitions", "6", "--yes"]
    args += ["--kafka-bootstrap", s.kafka_bootstrap, "--topic", s.topic, "--keyspace", s.keyspace]
    args += ["--cassandra-hosts", s.cassandra_hosts, "--cassandra-port", str(s.cassandra_port)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for _ in range(3):  # exit 75 before the cut (the shared servers were slow): again
        if await kill_once_partition_0_is_cut(args, env):
            break
    grow = await old.store.grow(s.topic)
    assert grow is not None and 0 in grow.cut and grow.phase is not Phase.DONE
    again = await run_again(args)
    assert again.returncode == 0, again.stderr
    await assert_grown(old)
    # done, the topic lives on in the grown one: a next grow is of it, to a multiple of 6
    refused = await run_again([*args[:6], "9", *args[7:]])
    assert refused.returncode == REFUSED_EXIT, refused.stderr
    assert b"the topic has 6 partitions: it grows to a multiple of 6 only" in refused.stderr
