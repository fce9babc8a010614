"""The bench's rows compare like with like (issue 38's "bench honesty"): without servers, on
fakes of what each scenario talks to."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from bench import append, replication
from bench.append import BASELINES, MODES, _measure, _writers
from bench.common import Section
from bench.replication import LagPoint, _lag_rows, lag
from bench.subscription import subscription_rows
from journal.core.model import Ack, Position


def test_the_subscription_goal_is_held_to_the_consumer_decoding_as_it_does() -> None:
    section = Section("Subscription", "")
    baselines: dict[Any, list[float]] = {
        "nothing": [1000.0],
        "codec": [400.0],
        "orjson": [200.0],
    }
    subscription_rows(section, [120.0], 100, baselines)
    goal = next(row for row in section.rows if row.goal)
    assert goal.baseline == 400.0
    assert "decoding as it does" in goal.name
    assert "decoding as the subscription does" in goal.goal
    assert goal.met  # 120 >= 0.25 x 400 (it would not be against the 1,000 of no decoding)
    others = {row.name: row.baseline for row in section.rows if row is not goal}
    assert others["note: the same against a raw consumer that decodes nothing"] == 1000.0
    assert others["note: the same against a raw consumer that orjson-decodes every payload"] == (
        200.0
    )


async def test_contending_writers_send_the_same_events_as_their_baseline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bodies: dict[str, list[Any]] = {}

    async def append_events(request: web.Request) -> web.Response:
        journal = request.match_info["journal"]
        mode = "at_end" if "-at_end" in journal else "own"
        bodies.setdefault(mode, []).append(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/journals/{journal}/events", append_events)
    monkeypatch.setattr(append, "CONTENTION_S", 0.2)
    async with TestServer(app) as server, ClientSession() as http:
        url = str(server.make_url("")).rstrip("/")
        for mode in ("own", "at_end"):
            await _writers(http, url, mode)

    def shape(body: dict[str, Any]) -> list[tuple[int, list[str]]]:
        return [(len(str(event["payload"])), event["tags"]) for event in body["events"]]

    own, at_end = bodies["own"][0], bodies["at_end"][0]
    assert shape(at_end) == shape(own)  # the same payload and tags
    assert all("seqNr" not in event for event in at_end["events"])  # the owner numbers them


async def test_the_direct_clients_default_verified_path_has_a_mode() -> None:
    acks: list[Ack] = []

    class Journal:
        async def append(self, events: Any, ack: Ack) -> None:
            acks.append(ack)

    journals = SimpleNamespace(writer=SimpleNamespace(partitions=3), journal=lambda _: Journal())
    assert "direct_verified" in MODES
    assert BASELINES["direct_verified"] == "direct"
    for mode in ("direct", "direct_verified"):
        await _measure(mode, 1, 2, 4, journals, None, None, "", "")  # type: ignore[arg-type]
    assert acks == [Ack.KAFKA] * 4 + [Ack.VERIFIED] * 4


async def test_a_lag_point_counts_the_appends_left_unreplicated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Journal:
        async def append(self, events: Any, ack: Ack) -> Position:
            return Position(0, 5)

    class Store:
        async def pointers(self, topic: str) -> dict[int, int]:
            return {0: 4}  # never reaches the appends' offset

    journals = SimpleNamespace(topic="t", journal=lambda _: Journal())
    monkeypatch.setattr(replication, "LAG_WAIT_S", 0.1)
    lags = await lag(journals, Store(), rate=200, seconds=0.1)  # type: ignore[arg-type]
    assert lags.unreplicated == 2
    assert len(lags.lags) == 2
    assert min(lags.lags) >= 100  # each waited at least the wait


def test_a_lag_rows_p99_counts_and_names_the_unreplicated() -> None:
    section = Section("Replication", "")
    point = LagPoint(0.3, 6500, [10.0] * 98 + [120_000.0] * 2, 6400.0, 0.9, unreplicated=2)
    _lag_rows(section, point)
    p99 = next(row for row in section.rows if "p99" in row.name)
    assert "unreplicated appends counted" in p99.name
    assert p99.value >= 120_000
    assert p99.met is False
    assert "2 of them still unreplicated" in p99.note
