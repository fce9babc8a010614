"""Two real workers logging JSON lines: a request forwarded from one to the other carries one
request id, in both workers' lines, and no header's secret is ever logged."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support.eventually import eventually
from tests.support.harness import Harness
from tests.support.http_api import journal_path
from tests.support.workers import metric, running_workers, wait_settled

pytestmark = pytest.mark.integration

SECRET = "Bearer not-to-be-logged-7f3a"


def json_lines(log: Path) -> list[dict[str, object]]:
    """Every whole line of a worker's log, each one JSON object (else this fails); the last,
    without its newline yet, is still being written (a running worker's log)."""
    text = log.read_text()
    whole = text[: text.rfind("\n") + 1]
    return [orjson.loads(line) for line in whole.splitlines() if line.strip()]


def request_ids(log: Path) -> set[object]:
    return {line["request_id"] for line in json_lines(log) if "request_id" in line}


async def test_a_forwarded_request_has_one_id_in_both_workers_json_lines(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {"KJ_LOG_FORMAT": "json"}
    # the request lines (`web.access`) are DEBUG
    with running_workers(connected.settings, tmp_path_factory, env=env, loglevel="debug") as w:
        await wait_settled(w)
        front, owner = w
        name = "kafka_journal_forwarded_requests_total"
        sent: list[str] = []
        async with aiohttp.ClientSession() as session:
            # journals until one is owned by the other worker: front forwards it
            for n in range(40):
                before = await metric(front, name)
                sent.append(f"rid-{n}")
                headers = {"X-Request-Id": sent[-1], "Authorization": SECRET}
                url = front.url.with_path(journal_path(f"ids-{n}"), encoded=True)
                async with session.get(url, headers=headers) as got:
                    assert got.status == 200, await got.text()
                    assert got.headers["X-Request-Id"] == sent[-1]
                if await metric(front, name) > before:
                    break
            else:
                pytest.fail("no request was forwarded")
        forwarded = sent[-1]

        async def logged() -> bool:
            return forwarded in request_ids(front.log) and forwarded in request_ids(owner.log)

        await eventually(logged, f"{forwarded} in both workers' lines")
        # the requests served by front alone never reached the owner
        assert not set(sent[:-1]) & request_ids(owner.log)
        for worker in w:
            lines = json_lines(worker.log)  # every line: one JSON object
            assert {"time", "level", "logger", "message"} <= set(lines[0])
            assert "not-to-be-logged" not in worker.log.read_text()
