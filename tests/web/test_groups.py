"""Subscription groups over HTTP (`/subscriptions`), over the fake backend: a member's stream,
its acks on the worker that serves it, the listing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from journal.errors import KafkaUnavailable
from journal.subscriptions.groups import EventPosition
from tests.support.eventually import eventually
from tests.support.fake_backend import FakeBackend
from tests.support.http_api import journal_path
from tests.web.served import Served, serve
from tests.web.test_events import SSE, messages
from web.app import create_app
from web.error_answers import ErrorCode


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def served(backend: FakeBackend) -> AsyncIterator[Served]:
    async with serve(create_app(backend)) as served:
        for journal_id, seq_nr, tag in (("a", 1, "t"), ("a", 2, "u"), ("b", 1, "t")):
            body = {"events": [{"seqNr": seq_nr, "payload": {"n": seq_nr}, "tags": [tag]}]}
            path = served.at(journal_path(journal_id, "/events"))
            async with served.session.post(path, json=body) as answer:
                assert answer.status == 200, await answer.text()
        yield served


async def lines(answer: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    """The next `count` lines of a stream."""
    return [orjson.loads(await answer.content.readline()) for _ in range(count)]


async def sse_messages(answer: aiohttp.ClientResponse, count: int) -> list[dict[str, str]]:
    """The next `count` SSE messages of a stream, as a browser parses them (`messages`)."""
    got: list[dict[str, str]] = []
    while len(got) < count:
        block = b""
        while (line := await answer.content.readline()) != b"\n":
            assert line, "the stream ended"
            block += line
        got += messages(block.decode().removesuffix("\n"))
    return got


async def ack(served: Served, group: str, positions: list[str]) -> tuple[int, dict[str, Any]]:
    url = served.at(f"/subscriptions/{group}/ack")
    async with served.session.post(url, json={"positions": positions}) as answer:
        return answer.status, orjson.loads(await answer.read())


async def test_a_stream_writes_the_members_events_with_their_positions_then_heartbeats(
    served: Served,
) -> None:
    async with served.session.get(served.at("/subscriptions/g/events")) as answer:
        assert answer.status == 200
        assert answer.content_type == "application/x-ndjson"
        got = await lines(answer, 4)
    assert [(line["id"], line["seqNr"]) for line in got[:3]] == [("a", 1), ("a", 2), ("b", 1)]
    assert [EventPosition.parse(line["position"]) for line in got[:3]] == [
        EventPosition(0, 0, 0),
        EventPosition(0, 1, 0),
        EventPosition(1, 0, 0),
    ]
    assert got[0]["payload"] == {"n": 1} and got[0]["tags"] == ["t"]
    assert got[3] == {"heartbeat": True}


async def test_a_stream_keeps_the_events_with_the_tags(served: Served) -> None:
    async with served.session.get(served.at("/subscriptions/g/events?tags=u,v")) as answer:
        got = await lines(answer, 2)
    assert [(line.get("id"), line.get("seqNr")) for line in got] == [("a", 2), (None, None)]


async def test_acks_go_to_the_open_member_and_a_closed_stream_stops_it(
    served: Served, backend: FakeBackend
) -> None:
    async with served.session.get(served.at("/subscriptions/g/events")) as answer:
        got = await lines(answer, 3)
        (member,) = backend.open_members("g")
        positions = [line["position"] for line in got[:2]]
        assert await ack(served, "g", positions) == (200, {"acknowledged": 2})
        # acknowledged already: not counted again
        assert await ack(served, "g", positions) == (200, {"acknowledged": 0})

    async def stopped() -> bool:
        return member.stopped

    await eventually(stopped, "the member of the closed stream stopped")
    assert backend.open_members("g") == []
    async with served.session.get(served.at("/subscriptions/g/events")) as answer:
        (line,) = await lines(answer, 1)
    assert (line["id"], line["seqNr"]) == ("b", 1)  # the unacknowledged one only


async def test_an_sse_member_acks_the_ids_and_the_next_one_resumes_after_them(
    served: Served, backend: FakeBackend
) -> None:
    async with served.session.get(served.at("/subscriptions/g/events"), headers=SSE) as answer:
        assert answer.status == 200
        assert answer.content_type == "text/event-stream"
        got = await sse_messages(answer, 4)
        events = got[:3]
        data = [orjson.loads(message["data"]) for message in events]
        assert [(line["id"], line["seqNr"]) for line in data] == [("a", 1), ("a", 2), ("b", 1)]
        assert [message["id"] for message in events] == [line["position"] for line in data]
        assert got[3] == {"": "hb"}, "a heartbeat is a comment, without an id"
        (member,) = backend.open_members("g")
        acked = [message["id"] for message in events[:2]]
        assert await ack(served, "g", acked) == (200, {"acknowledged": 2})

    async def stopped() -> bool:
        return member.stopped

    await eventually(stopped, "the member of the closed stream stopped")
    # an EventSource reconnects with the last id it saw: ignored, the group's checkpoint rules
    headers = {**SSE, "Last-Event-ID": events[2]["id"]}
    async with served.session.get(served.at("/subscriptions/g/events"), headers=headers) as answer:
        assert answer.status == 200
        message, heartbeat = await sse_messages(answer, 2)
    line = orjson.loads(message["data"])
    assert (line["id"], line["seqNr"], message["id"]) == ("b", 1, events[2]["id"])
    assert heartbeat == {"": "hb"}


async def test_a_last_event_id_on_a_group_stream_is_not_read(served: Served) -> None:
    headers = {**SSE, "Last-Event-ID": "not a position"}
    async with served.session.get(served.at("/subscriptions/g/events"), headers=headers) as answer:
        assert answer.status == 200
        (message,) = await sse_messages(answer, 1)
    assert orjson.loads(message["data"])["seqNr"] == 1


async def test_an_ack_without_a_member_on_this_worker_is_409(served: Served) -> None:
    position = EventPosition(0, 0, 0).encode()
    status, body = await ack(served, "g", [position])
    assert status == 409
    assert body["error"]["code"] == ErrorCode.NO_MEMBER
    async with served.session.get(served.at("/subscriptions/g/events")) as answer:
        await lines(answer, 1)
        status, body = await ack(served, "other", [position])  # another group's
    assert status == 409
    assert body["error"]["code"] == ErrorCode.NO_MEMBER


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{", ErrorCode.MALFORMED_JSON),
        (b'{"positions": []}', ErrorCode.INVALID_BODY),
        (b'{"positions": ["x"]}', ErrorCode.INVALID_BODY),
        (b'{"positions": [1]}', ErrorCode.INVALID_BODY),
        (b'{"position": ["MDow"]}', ErrorCode.INVALID_BODY),
    ],
)
async def test_a_bad_ack_body_is_400(served: Served, body: bytes, code: ErrorCode) -> None:
    url = served.at("/subscriptions/g/ack")
    async with served.session.post(url, data=body) as answer:
        assert answer.status == 400
        assert (await answer.json())["error"]["code"] == code


@pytest.mark.parametrize("path", ["/subscriptions/a%20b/events", "/subscriptions/a%20b/ack"])
async def test_a_bad_group_name_is_400(served: Served, path: str) -> None:
    method = "POST" if path.endswith("ack") else "GET"
    body = {"positions": [EventPosition(0, 0, 0).encode()]}
    async with served.session.request(method, served.at(path), json=body) as answer:
        assert answer.status == 400
        assert (await answer.json())["error"]["code"] == ErrorCode.INVALID_GROUP


async def test_a_stream_with_an_unknown_parameter_is_400(served: Served) -> None:
    async with served.session.get(served.at("/subscriptions/g/events?after=x")) as answer:
        assert answer.status == 400
        assert (await answer.json())["error"]["code"] == ErrorCode.INVALID_QUERY


async def test_the_listing_has_each_group_with_its_partitions(served: Served) -> None:
    async with served.session.get(served.at("/subscriptions/g/events")) as answer:
        (line,) = await lines(answer, 1)
        assert await ack(served, "g", [line["position"]]) == (200, {"acknowledged": 1})
        async with served.session.get(served.at("/subscriptions")) as listing:
            assert listing.status == 200
            assert await listing.json() == {
                "groups": [
                    {
                        "name": "g",
                        "state": "Stable",
                        "partitions": [
                            {
                                "partition": 0,
                                "topic": "journal",
                                "topicPartition": 0,
                                "checkpoint": 1,
                                "end": 2,
                                "lag": 1,
                                "member": None,
                            }
                        ],
                    }
                ]
            }


async def test_a_stream_that_cannot_start_is_a_status(served: Served, backend: FakeBackend) -> None:
    backend.failure = KafkaUnavailable("no broker")
    async with served.session.get(served.at("/subscriptions/g/events")) as answer:
        assert answer.status == 503
    assert backend.open_members("g") == []
