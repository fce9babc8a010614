"""Subscription groups over HTTP against the real servers: a group's events streamed by a
member that lives as long as the request, acknowledged on its worker, and after a reconnection
only the unacknowledged ones again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from journal.core.model import Event, JsonPayload
from stack import Stack
from tests.support.eventually import eventually
from tests.support.harness import Harness, harness, unique
from tests.web.served import Served, serve
from web import DirectBackend, create_app
from web.error_answers import ErrorCode

pytestmark = pytest.mark.integration

JOURNALS = ("a", "b", "c", "d")


@pytest.fixture
async def h(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    # a topic of its own in the module's keyspace (`keyspace`: creating one is slow)
    async with harness(stack, keyspace, "groups_http") as connected:
        yield connected


@pytest.fixture
async def served(h: Harness) -> AsyncIterator[Served]:
    async with serve(create_app(DirectBackend(h.journals))) as served:
        yield served


async def events(answer: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    """The next `count` event lines of a member's stream (heartbeats skipped)."""
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(120):  # a bound, not a wait: the lines come as they come
        while len(got) < count:
            line = orjson.loads(await answer.content.readline())
            if line != {"heartbeat": True}:
                got.append(line)
    return got


async def ack(served: Served, group: str, positions: list[str]) -> tuple[int, dict[str, Any]]:
    url = served.at(f"/subscriptions/{group}/ack")
    async with served.session.post(url, json={"positions": positions}) as answer:
        return answer.status, orjson.loads(await answer.read())


async def test_a_reconnected_member_gets_only_the_unacknowledged_events(
    h: Harness, served: Served
) -> None:
    # every journal's first event, then every journal's second: in each partition the first
    # events come before the second ones, so acknowledging the first moves the checkpoints
    first_offsets: dict[int, list[int]] = {}
    second_offsets: dict[int, list[int]] = {}
    for seq_nr, offsets in ((1, first_offsets), (2, second_offsets)):
        for journal_id in JOURNALS:
            event = Event(seq_nr, frozenset({"x"}), JsonPayload.of({"n": seq_nr}))
            appended = await h.journals.journal(journal_id).append([event])
            offsets.setdefault(appended.partition, []).append(appended.offset)
    name = unique("g")
    stream = served.at(f"/subscriptions/{name}/events?tags=x")

    async with served.session.get(stream) as answer:
        assert answer.status == 200, await answer.text()
        got = await events(answer, 2 * len(JOURNALS))
        assert sorted((line["id"], line["seqNr"]) for line in got) == sorted(
            (j, n) for j in JOURNALS for n in (1, 2)
        )
        firsts = [line["position"] for line in got if line["seqNr"] == 1]
        assert await ack(served, name, firsts) == (200, {"acknowledged": len(JOURNALS)})

    async def left() -> dict[str, Any]:
        async with served.session.get(served.at("/subscriptions")) as listing:
            assert listing.status == 200
            (group,) = [g for g in (await listing.json())["groups"] if g["name"] == name]
            assert group["state"] == "Empty", group
            return dict(group)

    group = await eventually(left, "the closed stream's member left the group")
    checkpoints = {p["partition"]: p["checkpoint"] for p in group["partitions"]}
    assert {p: checkpoints[p] for p in second_offsets} == {
        p: min(offsets) for p, offsets in second_offsets.items()
    }, "each checkpoint at the partition's first unacknowledged event"
    assert all(p["member"] is None for p in group["partitions"])
    status, body = await ack(served, name, firsts)
    assert (status, body["error"]["code"]) == (409, ErrorCode.NO_MEMBER)

    async with served.session.get(stream) as answer:
        assert answer.status == 200, await answer.text()
        again = await events(answer, len(JOURNALS))
    # in each partition an acknowledged event would have come before the second events
    assert sorted((line["id"], line["seqNr"]) for line in again) == [(j, 2) for j in JOURNALS]


async def test_a_worker_past_its_group_streams_answers_503_with_retry_after(h: Harness) -> None:
    """Issue 38: each group stream is a Kafka consumer; a worker serves a bounded number."""
    await h.journals.journal("limit").append([Event(1, frozenset(), JsonPayload.of(1))])
    async with serve(create_app(DirectBackend(h.journals), max_group_streams=2)) as served:

        def stream(name: str) -> Any:
            return served.session.get(served.at(f"/subscriptions/{name}/events"))

        async with stream(unique("g")) as first, stream(unique("g")) as second:
            assert (first.status, second.status) == (200, 200)
            async with stream(unique("g")) as third:
                assert third.status == 503, "a third stream served past the limit of 2"
                assert third.headers["Retry-After"] == "1"
                assert (await third.json())["error"]["code"] == ErrorCode.GROUP_STREAMS_FULL
            await events(first, 1)

        async def room_again() -> bool:
            # the closed streams' members leave as their handlers notice (at their next write)
            async with stream(unique("g")) as again:
                assert again.status == 200, await again.text()
                return True

        await eventually(room_again, "a closed stream frees its place")
