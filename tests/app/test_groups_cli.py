"""`kafka-journal groups` and `groups reset`, and `subscribe --group`'s checks."""

from __future__ import annotations

import asyncio
import signal
import sys

import orjson
import pytest

from app.cli import main
from stack import Stack
from tests.app.test_cli import server_flags
from tests.journal.journal_contract import events
from tests.support.eventually import eventually
from tests.support.harness import harness, unique


def test_a_reset_needs_one_target_and_a_group_no_position() -> None:
    assert main(["groups", "reset", "billing"]) == 2
    assert main(["groups", "reset", "billing", "--to-start", "--to-time", "2026-01-01"]) == 2
    assert main(["subscribe", "--group", "billing", "--after", "MTox"]) == 2


@pytest.mark.integration
async def test_a_reset_group_shows_its_checkpoints_and_lag(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(stack, unique("kj_groups_cli"), "groups_cli", 2) as connected:
        appended = await connected.journals.journal("a").append(events(1, 2))
        flags = ["groups", *server_flags(connected.settings)]

        def run(*more: str) -> tuple[int, str]:
            """The exit code, and what it printed (stdout, then stderr)."""
            code = main([*flags, *more])
            printed = capsys.readouterr()
            return code, printed.out + printed.err

        async def checkpoints() -> list[list[str]]:
            code, out = await asyncio.to_thread(run)
            assert code == 0
            # billing's alone: the shared Kafka may hold other tests' groups meanwhile
            return [
                line.split()[:4] for line in out.splitlines()[1:] if line.startswith("billing ")
            ]

        code, out = await asyncio.to_thread(run, "reset", "billing", "--to-start", "--yes")
        assert code == 0 and out.splitlines() == [
            "billing partition 0: checkpoint none -> 0",
            "billing partition 1: checkpoint none -> 0",
            "billing: 2 checkpoints moved",
        ]
        code, out = await asyncio.to_thread(run, "reset", "billing", "--to-time", "2020-01-01")
        assert code == 2  # no time zone
        code, out = await asyncio.to_thread(run)
        rows = [line.split() for line in out.splitlines()[1:] if line.startswith("billing ")]
        assert code == 0 and [r[:4] for r in rows] == [
            ["billing", "Empty", "0", "0"],
            ["billing", "Empty", "1", "0"],
        ]
        assert sum(int(r[5]) for r in rows) == 1  # the one record: the Append

        # to the end, only the Append's partition: shown first, changed only when confirmed
        p = appended.partition
        to_end = ("reset", "billing", "--to-time", "2100-01-01T00:00:00Z", "--partition", str(p))
        code, out = await asyncio.to_thread(run, *to_end, "--dry-run")
        assert code == 0 and out.splitlines() == [
            f"billing partition {p}: checkpoint 0 -> 1",
            "billing: nothing committed (dry run)",
        ]
        assert await checkpoints() == [
            ["billing", "Empty", "0", "0"],
            ["billing", "Empty", "1", "0"],
        ]
        code, out = await asyncio.to_thread(run, *to_end)  # no terminal to ask, no --yes
        assert code == 2 and "give --yes" in out
        assert await checkpoints() == [
            ["billing", "Empty", "0", "0"],
            ["billing", "Empty", "1", "0"],
        ]
        code, out = await asyncio.to_thread(run, *to_end, "-y")
        assert code == 0 and out.splitlines()[-1] == "billing: 1 checkpoints moved"
        moved = [["billing", "Empty", str(q), "1" if q == p else "0"] for q in (0, 1)]
        assert await checkpoints() == moved  # the other partition's is where it was
        code, out = await asyncio.to_thread(
            run, "reset", "billing", "--to-start", "--partition", "2"
        )
        assert code == 1 and "not [2]" in out


@pytest.mark.integration
async def test_a_member_killed_9_leaves_nothing_skipped(stack: Stack) -> None:
    """A member in another process (`subscribe --group`) killed with SIGKILL, without
    leaving the group or a last commit: the next member delivers every accepted event from
    the dead one's checkpoint on (what it printed may come again, nothing is skipped)."""
    async with harness(stack, unique("kj_groups_kill"), "groups_kill", 4) as connected:
        journals = connected.journals
        for j in range(8):
            await journals.journal(f"j{j}").append(events(1, 3))
        name = unique("g")
        command = ["subscribe", "--group", name, *server_flags(connected.settings)]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", *command, stdout=asyncio.subprocess.PIPE
        )
        printed: set[tuple[str, int]] = set()
        try:
            assert process.stdout is not None
            while len(printed) < 24:
                line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
                assert line, "the member ended"
                event = orjson.loads(line)
                printed.add((event["id"], event["seqNr"]))
            process.send_signal(signal.SIGKILL)  # its last commits may not have been made
            assert await process.wait() == -signal.SIGKILL
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        while (line := await process.stdout.readline()) != b"":
            event = orjson.loads(line)
            printed.add((event["id"], event["seqNr"]))
        for j in range(8):  # the group's members gone: the next one must deliver these
            await journals.journal(f"j{j}").append(events(4, 5))
        got: set[tuple[str, int]] = set()
        async with journals.subscribe_group(name, heartbeat_s=0.5) as member:

            async def everything() -> bool:
                async for batch in member.batches():
                    got.update((e.key.id, e.record.seq_nr) for e in batch)
                    member.ack(*(e.position for e in batch))
                    if not batch:  # quiet: all there is
                        break
                written = {(f"j{j}", n) for j in range(8) for n in range(1, 6)}
                assert written - printed - got == set(), "events skipped"
                return True

            await eventually(everything, "the next member delivers what the dead one left")
