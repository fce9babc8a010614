"""The HTTP API against the real servers: the semantic suite through HTTP, bad input, streaming.

A real aiohttp server on 127.0.0.1 serves `create_app(DirectBackend(Journals.connect(...)))`;
the suite talks to it with aiohttp.ClientSession only, so it tests exactly what a client sees.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import orjson
import pytest

from journal.core.model import SEQ_NR_MAX
from stack import Stack
from tests.journal.journal_contract import JournalContract, events
from tests.support.harness import Harness, harness
from tests.support.http_api import HttpJournals, journal_path, nothing
from tests.web.served import Served, serve
from web import DirectBackend, create_app
from web.error_answers import ErrorCode
from web.limits import DEFAULT_MAX_BODY_BYTES

pytestmark = pytest.mark.integration


class HttpApi(HttpJournals):
    """The suite's JournalApi against one server; `replicating`: settle() replicates."""

    def __init__(self, served: Served, connected: Harness, replicating: bool) -> None:
        super().__init__(served.session, [served.url], connected.settle if replicating else nothing)
        self.served = served
        self.harness = connected


async def http_api(stack: Stack, keyspace: str, replicating: bool) -> AsyncIterator[HttpApi]:
    async with (
        harness(stack, keyspace, "journal_web") as connected,
        serve(create_app(DirectBackend(connected.journals))) as served,
    ):
        yield HttpApi(served, connected, replicating)


class TestHttp(JournalContract):
    @pytest.fixture(scope="class")
    @classmethod
    async def api(cls, stack: Stack, keyspace: str, replicating: bool) -> AsyncIterator[HttpApi]:
        async for api in http_api(stack, keyspace, replicating):
            yield api


# --- bad input: a 4xx with the right code, and the service keeps serving -----------------------


@pytest.fixture(scope="module")
async def api(stack: Stack, keyspace: str) -> AsyncIterator[HttpApi]:
    async for one in http_api(stack, keyspace, replicating=False):
        yield one


async def error_of(api: HttpApi, method: str, path: str, **kwargs: object) -> tuple[int, str]:
    async with api.served.session.request(method, api.served.at(path), **kwargs) as response:  # type: ignore[arg-type]
        assert response.headers["Content-Type"].startswith("application/json")
        body = orjson.loads(await response.read())
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
        assert body["error"]["message"]
        return response.status, body["error"]["code"]


async def assert_still_serves(api: HttpApi) -> None:
    journal_id = f"ok-{uuid.uuid4().hex[:8]}"
    await api.append(journal_id, events(1, 2))
    assert await api.read(journal_id) == events(1, 2)


EVENTS = journal_path("bad", "/events")
BIG = 2 * DEFAULT_MAX_BODY_BYTES  # over the body limit


#: (method, path, body, status, code) of requests that must be refused
BAD_REQUESTS: list[tuple[str, str, bytes | None, int, ErrorCode]] = [
    ("POST", EVENTS, b"{not json", 400, ErrorCode.MALFORMED_JSON),
    ("POST", EVENTS, b"", 400, ErrorCode.MALFORMED_JSON),
    ("POST", EVENTS, b"\xff\xfe", 400, ErrorCode.MALFORMED_JSON),
    ("POST", EVENTS, b'{"events": 1}', 400, ErrorCode.INVALID_BODY),
    ("POST", EVENTS, b'{"evnts": []}', 400, ErrorCode.INVALID_BODY),
    ("POST", EVENTS, b'{"events": [{"seqNr": "1"}]}', 400, ErrorCode.INVALID_SEQ_NR),
    ("POST", EVENTS, b'{"events": [{"seqNr": 1, "tags": "t"}]}', 400, ErrorCode.INVALID_BODY),
    (
        "POST",
        EVENTS,
        b'{"events": [{"seqNr": 1}, {"seqNr": 3}]}',
        400,
        ErrorCode.INVALID_SEQ_NR,
    ),
    ("POST", EVENTS, b'{"events": [{"seqNr": 0}]}', 400, ErrorCode.INVALID_SEQ_NR),
    ("POST", EVENTS, b'{"events": [{"seqNr": -5}]}', 400, ErrorCode.INVALID_SEQ_NR),
    (
        "POST",
        EVENTS,
        f'{{"events": [{{"seqNr": {SEQ_NR_MAX + 1}}}]}}'.encode(),
        400,
        ErrorCode.INVALID_SEQ_NR,
    ),
    (
        "POST",
        EVENTS,
        b'{"events": [{"seqNr": 1, "payload": 1, "payloadText": "t"}]}',
        400,
        ErrorCode.INVALID_PAYLOAD,
    ),
    (
        "POST",
        EVENTS,
        b'{"events": [{"seqNr": 1, "payloadBinary": "%%%"}]}',
        400,
        ErrorCode.INVALID_PAYLOAD,
    ),
    (
        "POST",
        EVENTS,
        b'{"events": [{"seqNr": 1}], "expireAfter": "1 day"}',
        400,
        ErrorCode.INVALID_EXPIRE_AFTER,
    ),
    (
        "POST",
        EVENTS,
        b'{"events": [{"seqNr": 1}], "headers": {"h": 1}}',
        400,
        ErrorCode.INVALID_HEADERS,
    ),
    (
        "POST",
        EVENTS,
        orjson.dumps({"events": [{"seqNr": 1, "payloadText": "x" * BIG}]}),
        413,
        ErrorCode.BODY_TOO_LARGE,
    ),
    (
        "POST",  # fits the body limit, not Kafka's record limit (1 000 000 bytes)
        EVENTS,
        orjson.dumps({"events": [{"seqNr": 1, "payloadText": "x" * 1_010_000}]}),
        413,
        ErrorCode.APPEND_TOO_LARGE,
    ),
    ("GET", f"{EVENTS}?from=abc", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", f"{EVENTS}?from=0", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", f"{EVENTS}?limit=-1", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", f"{EVENTS}?to={SEQ_NR_MAX + 1}", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", f"{EVENTS}?from=1&from=2", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", f"{EVENTS}?frm=1", None, 400, ErrorCode.INVALID_QUERY),
    ("DELETE", EVENTS, None, 400, ErrorCode.INVALID_QUERY),
    ("DELETE", f"{EVENTS}?to=0", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", "/nowhere", None, 404, ErrorCode.NOT_FOUND),
    ("GET", "/journals/", None, 404, ErrorCode.NOT_FOUND),
    ("GET", "/journals?limit=0", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", "/journals?limit=1001", None, 400, ErrorCode.INVALID_QUERY),
    ("GET", "/journals?prefx=a", None, 400, ErrorCode.INVALID_QUERY),
    ("POST", "/journals", None, 405, ErrorCode.METHOD_NOT_ALLOWED),
    ("PUT", EVENTS, b"{}", 405, ErrorCode.METHOD_NOT_ALLOWED),
    ("PATCH", journal_path("bad"), None, 405, ErrorCode.METHOD_NOT_ALLOWED),
    ("POST", "/metrics", None, 405, ErrorCode.METHOD_NOT_ALLOWED),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), BAD_REQUESTS)
async def test_bad_requests_get_a_clear_4xx_and_the_service_goes_on(
    api: HttpApi, method: str, path: str, body: bytes | None, status: int, code: ErrorCode
) -> None:
    assert await error_of(api, method, path, data=body) == (status, code)
    await assert_still_serves(api)


async def test_nothing_of_a_refused_append_is_written(api: HttpApi) -> None:
    journal_id = f"refused-{uuid.uuid4().hex[:8]}"
    path = journal_path(journal_id, "/events")
    bad = {"events": [{"seqNr": 1}, {"seqNr": 2, "payloadBinary": "!"}]}
    assert await error_of(api, "POST", path, json=bad) == (400, ErrorCode.INVALID_PAYLOAD)
    assert await api.read(journal_id) == []
    assert await api.info(journal_id) == (None, None)


# --- streaming -------------------------------------------------------------------------------


async def test_a_long_journal_streams_back_line_by_line(api: HttpApi) -> None:
    journal_id = f"long-{uuid.uuid4().hex[:8]}"
    total, batch = 3000, 500
    for first in range(1, total + 1, batch):
        await api.append(journal_id, events(first, first + batch - 1))
    url = api.served.at(journal_path(journal_id, "/events"))
    expected = 1
    async with api.served.session.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/x-ndjson"
        assert response.headers.get("Transfer-Encoding") == "chunked"  # streamed, not buffered
        assert "Content-Length" not in response.headers
        async for line in response.content:
            event = orjson.loads(line)
            assert event["seqNr"] == expected
            assert event["payload"] == {"n": expected}
            assert event["timestamp"].endswith("Z")
            expected += 1
    assert expected == total + 1
    limited = await api.read(journal_id, from_=2990, limit=5)
    assert [e.seq_nr for e in limited] == [2990, 2991, 2992, 2993, 2994]


async def test_metadata_headers_and_expiry_round_trip(api: HttpApi) -> None:
    journal_id = f"meta-{uuid.uuid4().hex[:8]}"
    path = journal_path(journal_id, "/events")
    body = {
        "events": [{"seqNr": 1, "payload": {"a": 1}, "tags": ["t"]}],
        "metadata": {"causation": "x"},
        "headers": {"trace": "abc"},
        "expireAfter": "PT36H",
    }
    answer = await api.request_json("POST", path, json=body)
    async with api.served.session.get(api.served.at(path)) as response:
        (line,) = [orjson.loads(raw) async for raw in response.content]
    assert line["partition"] == answer["partition"] and line["offset"] == answer["offset"]
    assert line["metadata"] == {"causation": "x"}
    assert line["headers"] == {"trace": "abc"}
    assert line["expireAfter"] == "P1DT12H"


# --- operational routes ----------------------------------------------------------------------


async def test_health_readiness_metrics(api: HttpApi) -> None:
    session = api.served.session
    async with session.get(api.served.at("/healthz")) as response:
        assert response.status == 200 and await response.json() == {"status": "ok"}
    async with session.get(api.served.at("/readyz")) as response:
        assert response.status == 200 and await response.json() == {"status": "ready"}
    await assert_still_serves(api)
    async with session.get(api.served.at("/metrics")) as response:
        assert response.status == 200
        text = await response.text()
    assert "# TYPE kafka_journal_http_requests_total counter" in text
    assert 'route="/journals/{id}/events"' in text
    assert "kafka_journal_reads_total" in text  # the core's counters are there too


async def test_openapi_describes_every_route_of_the_app(api: HttpApi) -> None:
    async with api.served.session.get(api.served.at("/openapi.json")) as response:
        assert response.status == 200
        document = await response.json()
    assert document["openapi"] == "3.1.0"
    routes = {
        (route.method.lower(), route.resource.canonical)
        for route in api.served.app.router.routes()
        if route.resource is not None
    }
    # 7 journal routes (erase), /events, 3 snapshot routes, 6 ops routes (/status,
    # /quarantine), 3 of subscription groups, 2 of the console
    assert len(routes) == 22
    for method, path in routes:
        assert method in document["paths"].get(path, {}), f"{method.upper()} {path} undocumented"
    assert "Error" in document["components"]["schemas"]
