"""`kafka-journal groups` and `groups reset`, and `subscribe --group`'s checks."""

from __future__ import annotations

import asyncio

import pytest

from app.cli import main
from stack import Stack
from tests.app.test_cli import server_flags
from tests.journal.journal_contract import events
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
        await connected.journals.journal("a").append(events(1, 2))
        flags = ["groups", *server_flags(connected.settings)]

        def run(*more: str) -> tuple[int, str]:
            code = main([*flags, *more])
            return code, capsys.readouterr().out

        code, out = await asyncio.to_thread(run, "reset", "billing", "--to-start")
        assert code == 0 and out.splitlines() == [
            "billing partition 0: checkpoint 0",
            "billing partition 1: checkpoint 0",
        ]
        code, out = await asyncio.to_thread(run, "reset", "billing", "--to-time", "2020-01-01")
        assert code == 2  # no time zone
        code, out = await asyncio.to_thread(run)
        rows = [line.split() for line in out.splitlines()[1:]]
        assert code == 0 and [r[:4] for r in rows] == [
            ["billing", "Empty", "0", "0"],
            ["billing", "Empty", "1", "0"],
        ]
        assert sum(int(r[5]) for r in rows) == 1  # the one record: the Append
