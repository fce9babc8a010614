"""The bench's rows compare like with like (issue 38's "bench honesty"): without servers, on
fakes of what each scenario talks to."""

from __future__ import annotations

import asyncio
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


def test_a_raw_insert_covers_each_journals_seq_nrs_once_however_many_journals() -> None:
    lanes, rounds, per_batch = 100, 5, 10
    for journals in (1, 7, 100):
        slots = [
            replication.raw_slot(lane, round_, lanes, per_batch, journals)
            for round_ in range(rounds)
            for lane in range(lanes)
        ]
        firsts: dict[str, list[int]] = {}
        for journal_id, first in slots:
            firsts.setdefault(journal_id, []).append(first)
        assert len(firsts) == journals
        # each journal's rows are its Appends 1.. of `per_batch` events, none twice
        for numbers in firsts.values():
            assert sorted(numbers) == [n * per_batch + 1 for n in range(len(numbers))]
    # without `journals`, each lane is a journal of its own (the replication section's)
    assert replication.raw_slot(3, 2, lanes, per_batch, None) == ("raw-3", 21)
    assert replication.raw_slot(3, 2, lanes, per_batch, 100) == ("raw-3", 21)


async def test_a_one_journal_backlog_appends_its_seq_nrs_in_order_one_at_a_time() -> None:
    appended: list[tuple[str, int, int]] = []
    in_flight = 0

    class Journal:
        def __init__(self, journal_id: str) -> None:
            self.id = journal_id

        async def append(self, events: Any, ack: Ack) -> Position:
            nonlocal in_flight
            in_flight += 1
            assert in_flight == 1  # never two appends of the one journal at once
            await asyncio.sleep(0)
            appended.append((self.id, events[0].seq_nr, events[-1].seq_nr))
            in_flight -= 1
            return Position(0, len(appended))

    journals = SimpleNamespace(journal=Journal)
    appends = await replication.write_backlog(journals, 50, 10, journal_count=1)  # type: ignore[arg-type]
    assert appends == 5
    assert len({journal_id for journal_id, _, _ in appended}) == 1
    assert [(first, last) for _, first, last in appended] == [
        (1, 10),
        (11, 20),
        (21, 30),
        (31, 40),
        (41, 50),
    ]
