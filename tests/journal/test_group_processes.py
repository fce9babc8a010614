"""Subscription groups whose members are processes of their own (`tests.support.group_member`)
against the real servers: one killed with SIGKILL mid-batch while appends go on, without
leaving the group or a last commit; the others deliver what it had not committed."""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from journal.subscriptions.groups import group_statuses
from stack import Stack
from tests.journal.test_groups import PARTITIONS, Written, in_order, write, write_until
from tests.support.eventually import eventually
from tests.support.group_member import settings_json
from tests.support.harness import Harness, harness, unique


@dataclass
class MemberProcess:
    """A member process and the lines it wrote so far (`tests.support.group_member`)."""

    process: asyncio.subprocess.Process
    lines: list[dict[str, Any]] = field(default_factory=list)

    async def read(self) -> None:
        """Its lines, until it ends."""
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(orjson.loads(line))

    def assignment(self) -> tuple[int, frozenset[int]]:
        """Its last assignment so far: its generation and partitions."""
        assigned = [line for line in self.lines if "assignment" in line]
        if not assigned:
            return 0, frozenset()
        return assigned[-1]["generation"], frozenset(assigned[-1]["assignment"])

    def events(self, after_generation: int = 0) -> list[dict[str, Any]]:
        """Its event lines so far, of its assignments after the `after_generation`th."""
        return [
            line for line in self.lines if "id" in line and line["generation"] > after_generation
        ]


def ids(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(e["id"], e["seqNr"]) for e in events]


async def start_member(h: Harness, name: str, acks: str) -> MemberProcess:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.group_member",
        settings_json(h.settings),
        name,
        acks,
        stdout=asyncio.subprocess.PIPE,
    )
    return MemberProcess(process)


@pytest.fixture
async def h(stack: Stack) -> AsyncIterator[Harness]:
    async with harness(stack, unique("kj_group_procs"), "group_procs", PARTITIONS) as connected:
        yield connected


@pytest.mark.integration
async def test_a_member_process_killed_9_mid_batch_leaves_nothing_skipped(h: Harness) -> None:
    name = unique("g")
    written = Written()
    rng = random.Random(31)
    await write(h, written, 1, rng)
    await h.replicate()  # some records decided by the store's table, the rest by the fold
    members: list[MemberProcess] = []
    readers: list[asyncio.Task[None]] = []
    # appends go on throughout: until the victim is caught mid-work, and after its death until
    # the others took its partitions (how fast processes start and join depends on the host)
    enough = asyncio.Event()
    writing = write_until(h, written, rng, enough)
    try:
        for acks in ("every", "every", "every-other"):
            members.append(await start_member(h, name, acks))
        readers = [asyncio.create_task(m.read()) for m in members]
        survivors, victim = members[:2], members[2]

        async def shared() -> bool:
            assignments = [m.assignment()[1] for m in members]
            union = frozenset[int]().union(*assignments)
            return all(assignments) and sum(map(len, assignments)) == len(union) == PARTITIONS

        async def victim_mid_batch() -> bool:
            # in its current assignment, some events acknowledged and some not
            acked = {e["acked"] for e in victim.events(victim.assignment()[0] - 1)}
            return acked == {True, False}

        await eventually(shared, "three member processes share the 8 partitions")
        await eventually(victim_mid_batch, "the victim acknowledged some events, not all")
        at_death = [m.assignment()[0] for m in survivors]  # then they take its partitions
        victim.process.send_signal(signal.SIGKILL)  # no last commit, no leaving the group
        assert await victim.process.wait() == -signal.SIGKILL
        # it can commit no more: its partitions' checkpoints are what it had committed (or, if
        # the others took them over already, further on, past events they delivered)
        kafka, topic = h.settings.kafka_access(), h.settings.topic
        (status,) = [s for s in await group_statuses(kafka, topic) if s.name == name]
        checkpoints = {p.partition: p.committed or 0 for p in status.partitions}
        await readers[2]  # its last lines

        async def taken_over() -> bool:
            now = [m.assignment() for m in survivors]
            moved = all(g > before for (g, _), before in zip(now, at_death, strict=True))
            return moved and frozenset[int]().union(*(a for _, a in now)) == set(range(PARTITIONS))

        await eventually(taken_over, "the survivors took the victim's partitions")
        enough.set()
        await writing
        acked = {(e["id"], e["seqNr"]) for e in victim.events() if e["acked"]}

        async def all_delivered() -> bool:
            # what the victim acknowledged is handled: nobody need deliver it again
            delivered = {i for m in survivors for i in ids(m.events())} | acked
            assert written.events() - delivered == set(), "accepted events missing"
            return True

        await eventually(all_delivered, "every accepted event delivered to the group")
    finally:
        enough.set()
        await writing
        for m in members:
            if m.process.returncode is None:
                m.process.kill()
                await m.process.wait()
        for reader in readers:
            await reader

    generation, partitions = victim.assignment()
    final = victim.events(generation - 1)
    unacked = {(e["id"], e["seqNr"]) for e in final if not e["acked"]}
    assert unacked, "the victim left nothing unacknowledged"
    uncommitted = {
        (e["id"], e["seqNr"]) for e in final if e["position"][1] >= checkpoints[e["position"][0]]
    }
    assert {e["position"][0] for e in final} <= partitions
    redelivered = {
        i for m, before in zip(survivors, at_death, strict=True) for i in ids(m.events(before))
    }
    assert unacked - redelivered == set(), "the victim's unacknowledged events lost"
    assert uncommitted - redelivered == set(), "the victim's uncommitted events lost"
    for m in members:
        events = m.events()
        in_order([e["generation"] for e in events], ids(events))
        assert [e for e in events if e["payload"]["rejected"]] == [], "a rejected event"
        assert set(ids(events)) <= written.events()
