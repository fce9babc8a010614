"""What a forwarded request answers when its owner fails, against real servers (no Kafka).

A front worker (the API's error middleware, the Forwarder, and journal routes that answer
"served here") forwards to an owner that is a real server: an aiohttp app, a raw socket
server that reads the request and then hangs up, or a child process that is killed -9 while
it holds the request. Where the owner is comes from `Assignment`, a stand-in for Faust's
assignment that moves the partition after a given number of lookups, so a test decides when
the "rebalance" happens without any timing.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import orjson
import pytest
from aiohttp import web
from yarl import URL

from app.forwarding import FORWARDED_HEADER, Forwarder
from devtools.workers import free_port
from journal.metrics import METRICS, Metrics
from tests.support.fake_backend import FakeBackend
from tests.support.http_api import journal_path
from tests.web.served import Served, serve
from web.app import add_routes
from web.error_answers import ErrorCode
from web.middleware import error_middleware
from web.request_id import (
    REQUEST_ID_HEADER,
    current_request_id,
    echo_request_id,
    request_id_middleware,
)

RETRY_AFTER_S = 7
APPEND = orjson.dumps({"events": [{"seqNr": 1, "payload": {"n": 1}}]})
# (method, path, body): every journal route that changes something
CHANGES = [
    ("POST", journal_path("j", "/events"), APPEND),
    ("DELETE", journal_path("j", "/events?to=3"), None),
    ("DELETE", journal_path("j"), None),
]
READS = [("GET", journal_path("j", "/events"), None), ("GET", journal_path("j"), None)]


@dataclass
class Assignment:
    """Owners as Faust's assignment gives them: `owners[n]` at the n-th lookup, then the last."""

    owners: Sequence[URL | None]
    lookups: int = 0

    def owner_of(self, journal_id: str) -> URL | None:
        owner = self.owners[min(self.lookups, len(self.owners) - 1)]
        self.lookups += 1
        return owner


async def answer(who: str, request: web.Request) -> web.Response:
    """Who served the request, and the body it got (to show a body survives a reroute)."""
    body = await request.read()
    return web.json_response({"servedBy": who, "body": body.decode()})


def journal_routes(who: str) -> list[web.RouteDef]:
    async def handler(request: web.Request) -> web.Response:
        return await answer(who, request)

    return [
        web.route(method, path, handler)
        for method, path in [
            ("POST", "/journals/{id}/events"),
            ("GET", "/journals/{id}/events"),
            ("DELETE", "/journals/{id}/events"),
            ("GET", "/journals/{id}"),
            ("DELETE", "/journals/{id}"),
        ]
    ]


@asynccontextmanager
async def front(assignment: Assignment, owner_wait_s: float = 5.0) -> AsyncIterator[Served]:
    forwarder = Forwarder(assignment, owner_wait_s=owner_wait_s, retry_after_s=RETRY_AFTER_S)
    app = web.Application(middlewares=[error_middleware(RETRY_AFTER_S), forwarder.middleware])
    app.add_routes(journal_routes("front"))
    try:
        async with serve(app) as served:
            yield served
    finally:
        await forwarder.close()


@asynccontextmanager
async def live_owner() -> AsyncIterator[URL]:
    app = web.Application()
    app.add_routes(journal_routes("owner"))
    async with serve(app) as served:
        yield served.url


def refused() -> URL:
    """A port nothing listens on: connecting is refused, as to a worker just killed."""
    return URL(f"http://127.0.0.1:{free_port()}")


@dataclass
class HangingUp:
    """A socket server that reads each request whole, writes `reply` and hangs up."""

    reply: bytes = b""
    abort: bool = False  # RST instead of FIN
    received: list[bytes] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        chunked = b"transfer-encoding: chunked" in head.lower()
        body = await reader.readuntil(b"0\r\n\r\n") if chunked else b""
        self.received.append(head + body)
        writer.write(self.reply)
        await writer.drain()
        if self.abort:
            writer.transport.abort()
        else:
            writer.close()


@asynccontextmanager
async def hanging_up(owner: HangingUp) -> AsyncIterator[URL]:
    server = await asyncio.start_server(owner.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield URL(f"http://127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()


@dataclass(frozen=True)
class Got:
    status: int
    body: bytes
    retry_after: str | None


async def send(
    served: Served,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str] | None = None,
) -> Got:
    """The front's answer to a client."""
    async with served.session.request(method, served.at(path), data=body, headers=headers) as got:
        return Got(got.status, await got.read(), got.headers.get("Retry-After"))


def served_by(got: Got) -> str:
    assert got.status == 200, got
    who: str = orjson.loads(got.body)["servedBy"]
    return who


def error(got: Got) -> tuple[int, str, str | None]:
    code: str = orjson.loads(got.body)["error"]["code"]
    return got.status, code, got.retry_after


def failures(kind: str) -> float:
    return METRICS.value("kafka_journal_forward_failures_total", kind=kind)


# --- never reached: the request goes where the partition went -------------------------------


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
async def test_a_change_that_never_reached_a_dead_owner_goes_to_the_new_owner(
    method: str, path: str, body: bytes | None
) -> None:
    async with live_owner() as new_owner:
        # the partition moves after the forwarder found its old owner gone twice
        assignment = Assignment([refused(), refused(), new_owner])
        before = failures("never_reached")
        async with front(assignment) as served:
            got = await send(served, method, path, body)
    assert served_by(got) == "owner"
    assert orjson.loads(got.body) == {"servedBy": "owner", "body": (body or b"").decode()}
    assert assignment.lookups == 3
    assert failures("never_reached") == before + 2


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
async def test_a_change_that_never_reached_a_dead_owner_is_served_here_once_this_worker_owns_it(
    method: str, path: str, body: bytes | None
) -> None:
    assignment = Assignment([refused(), None])
    async with front(assignment) as served:
        got = await send(served, method, path, body)
    assert served_by(got) == "front"
    assert orjson.loads(got.body) == {"servedBy": "front", "body": (body or b"").decode()}
    assert assignment.lookups == 2


async def test_a_change_waits_for_a_new_owner_only_so_long() -> None:
    assignment = Assignment([refused()])
    # long enough to look again after the first refusal, however slow this machine is
    async with front(assignment, owner_wait_s=2.0) as served:
        got = await send(served, *CHANGES[0])
    assert error(got) == (503, ErrorCode.NOT_READY, str(RETRY_AFTER_S))
    assert assignment.lookups >= 2  # it did look again before giving up


@pytest.mark.parametrize("key", [None, "k-1"])
async def test_an_append_lost_after_it_was_sent_says_whether_it_is_safe_to_repeat(
    key: str | None,
) -> None:
    """Issue 38 item 6: an append at the end without an Idempotency-Key is not safe to repeat
    (numbered anew: appended twice if the first took effect), and the answer says so."""
    at_end = orjson.dumps({"events": [{"payload": {"n": 1}}]})
    headers = None if key is None else {"Idempotency-Key": key}
    owner = HangingUp()
    async with hanging_up(owner) as url, front(Assignment([url, None])) as served:
        got = await send(served, "POST", journal_path("j", "/events"), at_end, headers)
    assert error(got) == (503, ErrorCode.OUTCOME_UNKNOWN, str(RETRY_AFTER_S))
    message: str = orjson.loads(got.body)["error"]["message"]
    assert ("not safe to repeat" in message) == (key is None), message
    assert ("send an Idempotency-Key" in message) == (key is None), message


@pytest.mark.parametrize(("method", "path", "body"), READS)
async def test_a_read_whose_owner_is_gone_is_served_here_at_once(
    method: str, path: str, body: bytes | None
) -> None:
    assignment = Assignment([refused()])
    async with front(assignment) as served:
        got = await send(served, method, path, body)
    assert served_by(got) == "front"
    assert assignment.lookups == 1


# --- an owner that refuses (503 not_ready: starting, or stopping): as if never reached ------


@asynccontextmanager
async def refusing_owner() -> AsyncIterator[URL]:
    """An owner whose core is not connected: it answers every journal request 503 not_ready,
    as a stopping one does (web/draining.py)."""
    app = web.Application()
    add_routes(app, FakeBackend(is_ready=False), metrics=Metrics())
    async with serve(app) as served:
        yield served.url


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
async def test_a_change_refused_by_a_not_ready_owner_goes_to_the_new_owner(
    method: str, path: str, body: bytes | None
) -> None:
    async with refusing_owner() as leaving, live_owner() as new_owner:
        assignment = Assignment([leaving, new_owner])
        before = failures("never_reached")
        async with front(assignment) as served:
            got = await send(served, method, path, body)
    assert orjson.loads(got.body) == {"servedBy": "owner", "body": (body or b"").decode()}
    assert assignment.lookups == 2
    assert failures("never_reached") == before + 1


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
async def test_a_change_refused_by_a_not_ready_owner_is_served_here_once_this_worker_owns_it(
    method: str, path: str, body: bytes | None
) -> None:
    async with refusing_owner() as leaving, front(Assignment([leaving, None])) as served:
        got = await send(served, method, path, body)
    assert orjson.loads(got.body) == {"servedBy": "front", "body": (body or b"").decode()}


@pytest.mark.parametrize(("method", "path", "body"), READS)
async def test_a_read_refused_by_a_not_ready_owner_is_served_here(
    method: str, path: str, body: bytes | None
) -> None:
    async with refusing_owner() as leaving, front(Assignment([leaving])) as served:
        got = await send(served, method, path, body)
    assert served_by(got) == "front"


# --- reached, then lost: the outcome is unknown ---------------------------------------------


@pytest.mark.parametrize("abort", [False, True], ids=["fin", "rst"])
@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
async def test_a_change_lost_after_it_was_sent_is_503_outcome_unknown(
    method: str, path: str, body: bytes | None, abort: bool
) -> None:
    owner = HangingUp(abort=abort)
    before = failures("outcome_unknown")
    async with hanging_up(owner) as url, front(Assignment([url, None])) as served:
        got = await send(served, method, path, body)
    assert error(got) == (503, ErrorCode.OUTCOME_UNKNOWN, str(RETRY_AFTER_S))
    # it was sent (and not served here as well); aiohttp resends a DELETE once by itself
    assert len(owner.received) == (1 if method == "POST" else 2)
    for received in owner.received:
        assert received.startswith(f"{method} {path} ".encode())
        assert FORWARDED_HEADER.lower().encode() in received.lower()
    assert failures("outcome_unknown") == before + 1


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\nContent-Type: application/json\r\n\r\n{",
        b"HTTP/1.1 200 OK\r\nContent-Type: appl",
    ],
    ids=["body cut short", "head cut short"],
)
async def test_a_change_whose_answer_is_cut_short_is_503_outcome_unknown(reply: bytes) -> None:
    owner = HangingUp(reply)
    async with hanging_up(owner) as url, front(Assignment([url, None])) as served:
        got = await send(served, *CHANGES[0])
    assert error(got) == (503, ErrorCode.OUTCOME_UNKNOWN, str(RETRY_AFTER_S))
    assert len(owner.received) == 1


@pytest.mark.parametrize(("method", "path", "body"), READS)
async def test_a_read_lost_before_its_answer_is_served_here(
    method: str, path: str, body: bytes | None
) -> None:
    owner = HangingUp()
    async with hanging_up(owner) as url, front(Assignment([url])) as served:
        got = await send(served, method, path, body)
    assert served_by(got) == "front"
    assert len(owner.received) == 2  # aiohttp resends a GET once by itself


async def test_a_read_stream_broken_midway_breaks_the_clients_connection() -> None:
    owner = HangingUp(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        b'd\r\n{"seqNr": 1}\n\r\n'  # one whole line, then the owner is gone
    )
    before = failures("stream_broken")
    lines: list[bytes] = []
    async with hanging_up(owner) as url, front(Assignment([url])) as served:
        with pytest.raises(aiohttp.ClientPayloadError):
            async with served.session.get(served.at(READS[0][1])) as got:
                assert got.status == 200
                async for line in got.content:
                    lines.append(line)
    assert lines == [b'{"seqNr": 1}\n']  # what was relayed, and no clean end after it
    assert failures("stream_broken") == before + 1


# --- a real owner process, killed -9 ---------------------------------------------------------

_HOLDING_OWNER = """
import asyncio, sys
from aiohttp import web

async def hold(request):
    await request.read()
    print("received", flush=True)
    await asyncio.sleep(3600)

async def main():
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hold)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1])).start()
    print("listening", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def next_line(process: asyncio.subprocess.Process) -> bytes:
    assert process.stdout is not None
    return await asyncio.wait_for(process.stdout.readline(), timeout=30)


async def test_an_owner_killed_with_the_request_then_the_partition_moving_here() -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDING_OWNER, str(port), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert await next_line(process) == b"listening\n"
        owner = URL(f"http://127.0.0.1:{port}")
        # 1st request: to the owner, which dies holding it; 2nd: refused, then the partition
        # is this worker's
        assignment = Assignment([owner, owner, None])
        async with front(assignment) as served:
            in_flight = asyncio.create_task(send(served, *CHANGES[0]))
            assert await next_line(process) == b"received\n"
            process.send_signal(signal.SIGKILL)
            assert error(await in_flight) == (503, ErrorCode.OUTCOME_UNKNOWN, str(RETRY_AFTER_S))
            assert await process.wait() == -signal.SIGKILL
            assert served_by(await send(served, *CHANGES[0])) == "front"
        assert assignment.lookups == 3
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


# --- the request id travels with the request --------------------------------------------------


@asynccontextmanager
async def id_recording_owner(seen: list[tuple[str | None, str | None]]) -> AsyncIterator[URL]:
    """An owner behind the request id middleware, recording the id it got and the one current
    while it handles the request."""

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.headers.get(REQUEST_ID_HEADER), current_request_id.get()))
        return await answer("owner", request)

    app = web.Application(middlewares=[request_id_middleware])
    app.add_routes([web.get("/journals/{id}", handler)])
    async with serve(app) as served:
        yield served.url


@pytest.mark.parametrize("sent", [None, "client-chosen-1"])
async def test_a_forwarded_request_keeps_its_request_id(sent: str | None) -> None:
    seen: list[tuple[str | None, str | None]] = []
    async with id_recording_owner(seen) as owner:
        forwarder = Forwarder(Assignment([owner]), retry_after_s=RETRY_AFTER_S)
        app = web.Application(middlewares=[request_id_middleware, forwarder.middleware])
        app.on_response_prepare.append(echo_request_id)
        app.add_routes(journal_routes("front"))
        headers = {} if sent is None else {REQUEST_ID_HEADER: sent}
        try:
            async with (
                serve(app) as served,
                served.session.get(served.at(journal_path("j")), headers=headers) as got,
            ):
                assert got.status == 200
                answered_id = got.headers[REQUEST_ID_HEADER]
        finally:
            await forwarder.close()
    assert seen == [(answered_id, answered_id)]
    if sent is not None:
        assert answered_id == sent
