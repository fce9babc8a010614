"""The command line: `kafka-journal run`, the main job, ends with a worker answering."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from stack import Stack
from tests.journal.journal_contract import events
from tests.support.harness import settings_for, unique
from tests.support.http_api import HttpJournals
from tests.support.workers import WorkerProcess


@pytest.mark.integration
async def test_run_starts_a_worker_that_answers_and_says_how(stack: Stack, tmp_path: Path) -> None:
    settings = settings_for(stack, unique("journal_run"), unique("kj_run"))
    run = WorkerProcess(settings, unique("app"), tmp_path / "data", command="run")
    run.start()
    try:
        await run.wait_ready()
        async with aiohttp.ClientSession() as session:
            api = HttpJournals(session, [run.url])
            await api.append("hello", events(1, 2))
            assert await api.read("hello") == events(1, 2)
        assert f"Kafka Journal is serving {run.url}" in run.log.read_text()
        assert "curl -s -XPOST" in run.log.read_text()
    finally:
        run.stop()


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("stack", "worker", "run"):
        assert command in out
