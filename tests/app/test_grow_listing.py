"""`kafka-journal schema grow-listing` (app/grow_listing.py) against the real servers: the
listing grows 32 -> 64 buckets while replication lists new journals, purges and lists purged
ones again, and a page reads exactly the live ids before, during (every phase) and after; the
command killed -9 mid-copy and run again finishes; the dry run changes nothing; what it
refuses."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from app.confirm import REFUSED_EXIT, UNAVAILABLE_EXIT
from app.grow_listing import ListingGrowRefused, grow_listing
from journal.client.journals import Journals
from journal.core.listing import Listing, ListingPhase, ListingStep, bucket_numbers
from journal.core.model import Ack, Event, TextPayload
from journal.kafka.topic import TopicSpec, ensure_topic, quarantine_topic
from journal.settings import Settings
from journal.store import cql
from journal.store.cassandra import CassandraStore
from stack import Stack
from tests.support.harness import replicate_now, settings_for, unique
from tests.support.raw_store import session_of
from tests.support.workers import REPO

pytestmark = pytest.mark.integration

# short, so the command's three waits take seconds: it waits 3 leases plus a request's timeout
# (the default 10 s: a slow host's writes must not outlast it) per phase, and this test's
# processes (its own replication and pages) hold the same lease
LEASE_S = 0.2


@dataclass
class Listed:
    """A topic with journals, replicated by this test (the store's write side, as a worker's)."""

    settings: Settings
    store: CassandraStore
    journals: Journals
    live: set[str] = field(default_factory=set)
    purged: list[str] = field(default_factory=list)
    made: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(41))

    async def create(self, count: int) -> None:
        for _ in range(count):
            journal_id = f"j{self.made:04d}"
            self.made += 1
            await self.append(journal_id)

    async def append(self, journal_id: str) -> None:
        event = [Event(1, payload=TextPayload("e"))]
        await self.journals.journal(journal_id).append(event, ack=Ack.KAFKA)
        self.live.add(journal_id)

    async def purge(self, journal_id: str) -> None:
        await self.journals.journal(journal_id).purge()
        self.live.discard(journal_id)
        self.purged.append(journal_id)

    async def round(self) -> None:
        """New journals, a purge, a purged journal appended to again (listed anew), all
        replicated; then the listing must be exactly the live ids."""
        await self.create(2)
        await self.purge(self.rng.choice(sorted(self.live)))
        if len(self.purged) > 1:
            await self.append(self.purged.pop(0))
        await replicate_now(self.settings, self.store)
        await self.assert_listed()

    async def assert_listed(self) -> None:
        listing = await self.store.listing(self.settings.topic)
        got = await all_ids(self.store, self.settings.topic)
        assert got == sorted(self.live), (listing, set(got) ^ self.live)


async def all_ids(store: CassandraStore, topic: str) -> list[str]:
    ids: list[str] = []
    while True:
        page = await store.journal_ids(topic, "", ids[-1] if ids else None, 7)
        ids += page
        if len(page) < 7:
            return ids


async def rows_in(store: CassandraStore, topic: str, buckets: int) -> int:
    """The `journal_ids` rows of a generation, read from the table itself."""
    count = 0
    for bucket in bucket_numbers(buckets):
        rows = await cql.execute(
            session_of(store),
            f"SELECT COUNT(*) AS n FROM {store.keyspace_access.keyspace}.journal_ids "
            "WHERE topic = %s AND bucket = %s",
            (topic, bucket),
        )
        count += rows[0].n
    return count


@pytest.fixture
async def listed(stack: Stack, keyspace: str) -> AsyncIterator[Listed]:
    settings = settings_for(stack, unique("listing_grow"), keyspace).replace(
        listing_lease_s=LEASE_S
    )
    store = await CassandraStore.connect(settings.cassandra_config())
    await ensure_topic(settings.kafka_access(), TopicSpec(quarantine_topic(settings.topic), 1))
    try:
        async with await Journals.connect(settings, store=store) as journals:
            world = Listed(settings, store, journals)
            await world.create(40)
            await replicate_now(settings, store)
            await world.assert_listed()
            yield world
    finally:
        await store.close()


async def test_the_listing_reads_the_live_ids_before_during_and_after_a_grow(
    listed: Listed,
) -> None:
    """Rounds of replicated writes and purges run all along the command, racing its copy; and
    before each of its steps but most copies the command waits for one more round, so every
    phase is checked whatever the host's speed."""
    topic = listed.settings.topic
    rounds = 0
    phases: set[ListingPhase | None] = set()
    round_done = asyncio.Condition()

    stop = asyncio.Event()

    async def workload() -> None:
        nonlocal rounds
        try:
            while not stop.is_set():  # a whole round at a time: `live` is what was acknowledged
                await listed.round()
                phases.add((await listed.store.listing(topic)).phase)
                async with round_done:
                    rounds += 1
                    round_done.notify_all()
        finally:
            async with round_done:
                round_done.notify_all()  # a failed round ends the command's wait at once

    async def one_more_round(step: ListingStep) -> None:
        if step.action == "copy" and step.bucket not in (0, 16):
            return
        async with round_done:
            seen = rounds
            await asyncio.wait_for(
                round_done.wait_for(lambda: rounds > seen + 1 or running.done()), 120
            )
        if running.done():
            running.result()  # the round's failure, as it is

    command = await CassandraStore.connect(listed.settings.cassandra_config())  # its own
    running = asyncio.create_task(workload())
    try:
        said: list[str] = []
        done = await grow_listing(
            listed.settings,
            command,
            topic,
            64,
            yes=True,
            before_step=one_more_round,
            say=said.append,
        )
        assert not running.done(), running  # the rounds went on throughout, and passed
        stop.set()
        await asyncio.wait_for(running, 120)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await command.close()
    assert done == Listing(64)
    assert phases == {None, *ListingPhase}, phases  # rounds checked in every phase
    await listed.round()  # and after
    assert await rows_in(listed.store, topic, 32) == 0  # the old generation dropped
    assert await rows_in(listed.store, topic, 64) == len(listed.live)
    assert "switched: pages read 64 buckets" in said


async def test_the_dry_run_changes_nothing(listed: Listed) -> None:
    topic, store = listed.settings.topic, listed.store
    said: list[str] = []
    await grow_listing(listed.settings, store, topic, 64, dry_run=True, say=said.append)
    assert "32 buckets, phase none; next step: plan" in said[0]
    assert "(topic " in said[0] and "bucket 0..31)" in said[0]  # what a drop would delete
    assert await store.listing(topic) == Listing()
    assert await rows_in(store, topic, 64) == 0
    assert await rows_in(store, topic, 32) == len(listed.live)


async def test_it_refuses_less_than_double_and_another_count_than_the_recorded_one(
    listed: Listed,
) -> None:
    topic, store, settings = listed.settings.topic, listed.store, listed.settings
    with pytest.raises(ListingGrowRefused, match="at least twice"):
        await grow_listing(settings, store, topic, 48, yes=True, say=lambda _: None)

    planned = await store.record_listing_plan(topic, Listing(), 64)  # a run killed after it
    assert planned == Listing(32, 64, ListingPhase.GROWING)
    with pytest.raises(ListingGrowRefused, match="run it again with --buckets 64"):
        await grow_listing(settings, store, topic, 128, yes=True, say=lambda _: None)


async def kill_mid_copy(args: list[str], env: dict[str, str]) -> bool:
    """Run the command and kill -9 it once it printed bucket 5's copy; False if it exited 75
    before (the shared servers were slow)."""
    command = await asyncio.create_subprocess_exec(
        *args, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert command.stdout is not None and command.stderr is not None
    try:
        async with asyncio.timeout(120):
            while not (line := await command.stdout.readline()).startswith(b"bucket 5 of 32"):
                if not line:
                    why = await command.stderr.read()
                    if await command.wait() == UNAVAILABLE_EXIT:
                        return False
                    pytest.fail(f"ended before copying bucket 5: {why!r}")
        return True
    finally:
        if command.returncode is None:
            os.kill(command.pid, signal.SIGKILL)
        await command.wait()


async def test_the_command_killed_mid_copy_and_run_again_finishes(listed: Listed) -> None:
    s = listed.settings
    args = [sys.executable, "-m", "app.cli", "schema", "grow-listing", "--buckets", "64"]
    args += ["--yes", "--topic", s.topic, "--keyspace", s.keyspace]
    args += ["--cassandra-hosts", s.cassandra_hosts, "--cassandra-port", str(s.cassandra_port)]
    args += ["--listing-lease-s", str(LEASE_S)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for _ in range(3):
        if await kill_mid_copy(args, env):
            break
    record = await listed.store.listing(s.topic)
    assert record.phase is ListingPhase.GROWING and 5 in record.copied, record
    assert len(record.copied) < 32, record
    await listed.round()  # replication writes both meanwhile
    for _ in range(3):  # 75: Cassandra did not answer in time (a shared host): again
        again = await asyncio.to_thread(
            subprocess.run, args, cwd=REPO, capture_output=True, timeout=120
        )
        if again.returncode != UNAVAILABLE_EXIT:
            break
    assert again.returncode == 0, again.stderr
    assert await listed.store.listing(s.topic) == Listing(64)
    await listed.round()
    assert await rows_in(listed.store, s.topic, 32) == 0
    refused = await asyncio.to_thread(
        subprocess.run, [*args[:6], "96", *args[7:]], cwd=REPO, capture_output=True, timeout=120
    )
    assert refused.returncode == REFUSED_EXIT, refused.stderr
    assert b"at least twice" in refused.stderr
