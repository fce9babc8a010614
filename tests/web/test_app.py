"""The HTTP layer over a fake backend (no servers): status codes, error shapes, streaming.

The fake (`tests.support.fake_backend`) lets a test make the core fail in each way it can
(truncated history, Kafka or Cassandra down, a record too large, a bug, a failure mid-stream)
and check what a client sees.
"""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Mapping

import aiohttp
import orjson
import pytest
from aiohttp import web

from journal.codec import EnvelopeRefused
from journal.core.model import (
    Ack,
    BinaryPayload,
    Event,
    EventRecord,
    JournalKey,
    JsonPayload,
    PayloadMetadata,
    TextPayload,
)
from journal.errors import (
    AppendTooLarge,
    IdempotencyKeyReused,
    IdempotencyUnresolved,
    JournalErased,
    JournalMoved,
    JournalTruncated,
    KafkaUnavailable,
    OutcomeUnknown,
    SetupMissing,
    StoreUnavailable,
    TopicGrown,
    UndecodableBatch,
)
from journal.metrics import Metrics
from journal.subscriptions.subscription import (
    Heartbeat,
    SubscribedEvent,
    SubscriptionItem,
    SubscriptionPosition,
)
from tests.support.fake_backend import (
    APPEND,
    JOURNAL_REQUESTS,
    SNAPSHOT_LIMIT,
    T0,
    FakeBackend,
)
from tests.support.http_api import journal_path
from tests.web.served import Served, serve
from tests.web.test_validation import GAPPED_APPENDS
from web import add_routes, create_app
from web.error_answers import ErrorCode
from web.openapi import openapi_document
from web.representation import SubscriptionLines, subscription_line


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()  # the app's own: what a test reads is what it caused


@pytest.fixture
async def served(backend: FakeBackend, metrics: Metrics) -> AsyncIterator[Served]:
    app = create_app(
        backend,
        max_body_bytes=10_000,
        retry_after_s=3,
        metrics=metrics,
        max_snapshot_bytes=SNAPSHOT_LIMIT,
    )
    async with serve(app) as served:
        yield served


async def call(
    served: Served, method: str, path: str, **kwargs: object
) -> tuple[int, dict[str, object], Mapping[str, str]]:
    async with served.session.request(method, served.at(path), **kwargs) as response:  # type: ignore[arg-type]
        raw = await response.read()
        return response.status, orjson.loads(raw) if raw else {}, response.headers


async def error_of(served: Served, method: str, path: str, **kwargs: object) -> tuple[int, str]:
    status, body, headers = await call(served, method, path, **kwargs)
    assert headers["Content-Type"].startswith("application/json")
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message"} and error["message"]
    return status, str(error["code"])


# --- representation --------------------------------------------------------------------------


async def test_an_append_reads_back_with_every_field(served: Served, backend: FakeBackend) -> None:
    status, body, _ = await call(
        served,
        "POST",
        journal_path("a/b c", "/events"),
        json={
            "events": [
                {"seqNr": 1, "payload": None, "tags": ["z", "a"]},
                {"seqNr": 2, "payloadText": "t"},
                {"seqNr": 3, "payloadBinary": "AAE="},
                {"seqNr": 4},
            ],
            "metadata": {"m": [1]},
            "headers": {"h": "v"},
            "expireAfter": "PT36H",
        },
    )
    answer = {"partition": 0, "offset": 0, "seqNr": {"from": 1, "to": 4}}
    assert (status, body) == (200, answer)
    assert [r.event for r in backend.records["a/b c"]] == [  # '/' and ' ' survive the path
        Event(1, frozenset({"a", "z"})),  # a null payload is none (journal.core.model.Event)
        Event(2, frozenset(), TextPayload("t")),
        Event(3, frozenset(), BinaryPayload(b"\x00\x01")),
        Event(4),
    ]
    async with served.session.get(served.at(journal_path("a/b c", "/events"))) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/x-ndjson"
        lines = [orjson.loads(line) for line in (await response.read()).splitlines()]
    common = {
        "timestamp": "2024-05-06T07:08:09.123Z",
        "partition": 0,
        "offset": 0,
        "metadata": {"m": [1]},
        "expireAfter": "P1DT12H",
        "headers": {"h": "v"},
    }
    assert lines == [
        {"seqNr": 1, "tags": ["a", "z"], **common},
        {"seqNr": 2, "payloadText": "t", "tags": [], **common},
        {"seqNr": 3, "payloadBinary": "AAE=", "tags": [], **common},
        {"seqNr": 4, "tags": [], **common},
    ]


async def test_a_payload_round_trips_byte_exact_big_integers_included(served: Served) -> None:
    payload = f'{{"big": [{2**64}, {-(2**63) - 1}, {10**40}], "f": 1.50, "e": 2E3}}'.encode()
    path = journal_path("big", "/events")
    sent = b'{"events": [{"seqNr": 1, "payload": ' + payload + b"}]}"
    status, _, _ = await call(served, "POST", path, data=sent)
    assert status == 200
    async with served.session.get(served.at(path)) as response:
        line = await response.read()
    assert line.startswith(b'{"seqNr":1,"payload":' + payload + b',"tags":[]')
    assert orjson.loads(line.replace(payload, b"0"))["payload"] == 0  # the rest is JSON


@pytest.mark.parametrize("raw", GAPPED_APPENDS)
async def test_seq_nrs_that_do_not_follow_each_other_are_400(served: Served, raw: bytes) -> None:
    path = journal_path("gap", "/events")
    assert await error_of(served, "POST", path, data=raw) == (400, ErrorCode.INVALID_SEQ_NR)
    _, body, _ = await call(served, "POST", path, data=GAPPED_APPENDS[0])
    assert "must be consecutive: 3 follows 1" in str(body)


async def test_a_subscription_streams_events_with_id_and_position_then_a_heartbeat(
    served: Served, backend: FakeBackend
) -> None:
    backend.records["j"] = [
        EventRecord(Event(n, frozenset({f"t{n}"}), TextPayload("x")), T0, 0, n) for n in (1, 2)
    ]
    async with served.session.get(served.at("/events?tags=t2,t9&live=false")) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/x-ndjson")
        lines = [orjson.loads(line) for line in (await response.read()).splitlines()]
    two = SubscriptionPosition.of({0: 2}).encode()
    assert lines[0] == {
        "id": "j",
        "position": two,
        "seqNr": 2,
        "payloadText": "x",
        "tags": ["t2"],
        "timestamp": "2024-05-06T07:08:09.123Z",
        "partition": 0,
        "offset": 2,
    }
    assert lines[1:] == [{"heartbeat": True, "position": SubscriptionPosition().encode()}]
    async with served.session.get(served.at(f"/events?after={two}")) as response:
        assert [orjson.loads(line) for line in (await response.read()).splitlines()] == [
            {"heartbeat": True, "position": two}
        ]


def test_a_subscription_line_is_the_models_line_however_it_is_made() -> None:
    """`SubscriptionLines` (orjson, shared fields made once per Append) writes the very bytes
    `subscription_line` (the pydantic model) does, across Appends, payload kinds, metadata,
    headers, positions shared or not, and a number orjson cannot write."""
    full, h = PayloadMetadata("1 day", {"m": [1, 2.5, None]}), {"h": "v"}
    records = [
        EventRecord(Event(1, frozenset("ba"), JsonPayload.of({"x": [1, "é"]})), T0, 0, 5, full, h),
        EventRecord(Event(2, frozenset(), TextPayload("t")), T0, 0, 5, full, h),
        EventRecord(Event(3, frozenset(), BinaryPayload(b"\x00\x01")), T0, 1, 5),
        EventRecord(Event(4), T0, 1, 6),
        EventRecord(Event(5, frozenset(), JsonPayload.of(2**70)), T0, 1, 7),
    ]
    inside, last = SubscriptionPosition.of({0: 4, 1: 2}), SubscriptionPosition.of({0: 5, 1: 2})
    items: list[SubscriptionItem] = [
        SubscribedEvent(JournalKey("t", "j"), records[0], inside),
        SubscribedEvent(JournalKey("t", "j"), records[1], last),
        Heartbeat(last),
        SubscribedEvent(JournalKey("t", "k"), records[2], SubscriptionPosition.of({1: 5})),
        SubscribedEvent(JournalKey("t", "k"), records[3], SubscriptionPosition.of({1: 6})),
        SubscribedEvent(JournalKey("t", "k"), records[4], SubscriptionPosition.of({1: 7})),
    ]
    lines = SubscriptionLines()
    assert [lines.line(item) for item in items] == [subscription_line(item) for item in items]


@pytest.mark.parametrize(
    "query", ["after=%25%25", "after=", "live=yes", "live=true&live=true", "tail=1"]
)
async def test_a_bad_subscription_query_is_400(served: Served, query: str) -> None:
    assert await error_of(served, "GET", f"/events?{query}") == (400, "invalid_query")


async def test_unknown_journal_reads_empty_and_info_is_null(served: Served) -> None:
    async with served.session.get(served.at(journal_path("nope", "/events"))) as response:
        assert response.status == 200 and await response.read() == b""
    status, body, _ = await call(served, "GET", journal_path("nope"))
    assert (status, body) == (200, {"id": "nope", "seqNr": None, "deleteTo": None})


async def test_ids_are_percent_decoded_strictly(served: Served) -> None:
    status, body, _ = await call(served, "GET", "/journals/a%2Fb%20%C3%BC")
    assert (status, body["id"]) == (200, "a/b ü")
    status, body, _ = await call(served, "GET", "/journals/events")  # a journal named events
    assert (status, body["id"]) == (200, "events")
    for raw in ("%ff", "%C3"):
        path = f"/journals/{raw}/events"
        assert await error_of(served, "GET", path) == (400, ErrorCode.INVALID_JOURNAL_ID)


async def test_journal_ids_page_with_their_parameters(served: Served) -> None:
    for journal_id in ("b/1", "a", "b/2", "b/3"):
        await call(served, "POST", journal_path(journal_id, "/events"), **APPEND)
    assert (await call(served, "GET", "/journals"))[:2] == (
        200,
        {"journals": ["a", "b/1", "b/2", "b/3"], "next": None},
    )
    got = await call(served, "GET", "/journals?prefix=b/&limit=2")
    assert got[:2] == (200, {"journals": ["b/1", "b/2"], "next": "b/2"})
    got = await call(served, "GET", "/journals?prefix=b/&after=b/2&limit=2")
    assert got[:2] == (200, {"journals": ["b/3"], "next": None})
    for query in (
        "limit=0",
        "limit=1001",
        "limit=-1",
        "limit=x",
        "limit=1&limit=2",
        "from=a",
        "after=a&after=b",
    ):
        assert await error_of(served, "GET", f"/journals?{query}") == (
            400,
            ErrorCode.INVALID_QUERY,
        ), query


async def test_delete_and_purge_answer_positions(served: Served) -> None:
    status, body, _ = await call(served, "DELETE", journal_path("j", "/events?to=5"))
    assert (status, body) == (200, {"deleteTo": 5, "partition": 0, "offset": 99})
    status, body, _ = await call(served, "DELETE", journal_path("j"))
    assert (status, body) == (200, {"partition": 0, "offset": 100})


async def test_an_erasure_answers_where_its_purge_landed(
    served: Served, backend: FakeBackend
) -> None:
    status, body, _ = await call(served, "DELETE", journal_path("j", "/payloads"))
    assert (status, body) == (200, {"already": False, "partition": 0, "offset": 101})
    backend.failure = SetupMissing("erasure needs the deployment's key-encryption key")
    status, body, headers = await call(served, "DELETE", journal_path("j", "/payloads"))
    assert (status, body["error"]["code"]) == (503, "erasure_unavailable")  # type: ignore[index]
    assert "Retry-After" in headers


# --- snapshots -------------------------------------------------------------------------------


async def test_snapshots_put_latest_and_delete(served: Served) -> None:
    await call(served, "POST", journal_path("j", "/events"), json=events_body(1, 9))
    puts: dict[int, dict[str, object]] = {
        3: {"payload": {"state": [1, None]}},
        6: {"payloadText": "six"},
        9: {"payloadBinary": base64.b64encode(b"\x00nine").decode()},
    }
    for seq_nr, payload in puts.items():
        status, body, _ = await call(
            served, "PUT", journal_path("j", f"/snapshots/{seq_nr}"), json=payload
        )
        assert (status, body) == (200, {"seqNr": seq_nr, "timestamp": "2024-05-06T07:08:09.123Z"})
    for max_seq_nr, seq_nr in ((None, 9), (8, 6), (3, 3)):
        query = "" if max_seq_nr is None else f"?maxSeqNr={max_seq_nr}"
        status, body, _ = await call(served, "GET", journal_path("j", f"/snapshots/latest{query}"))
        expected = {"seqNr": seq_nr, "timestamp": "2024-05-06T07:08:09.123Z", **puts[seq_nr]}
        assert (status, body) == (200, expected)
    status, body, _ = await call(served, "DELETE", journal_path("j", "/snapshots?to=6"))
    assert (status, body) == (200, {"partition": 0, "offset": 101})
    latest = journal_path("j", "/snapshots/latest?maxSeqNr=8")
    assert await error_of(served, "GET", latest) == (404, ErrorCode.SNAPSHOT_NOT_FOUND)


async def test_snapshot_routes_take_the_journal_id_from_its_own_segment(
    served: Served, backend: FakeBackend
) -> None:
    journal_id = "a/snapshots/1 %"  # the id looks like the route's tail: only its place tells
    await call(served, "POST", journal_path(journal_id, "/events"), json=events_body(1, 1))
    path = journal_path(journal_id, "/snapshots/1")
    assert (await call(served, "PUT", path, json={"payload": 1}))[0] == 200
    assert set(backend.snapshots) == {journal_id}


def events_body(first: int, last: int) -> dict[str, object]:
    return {"events": [{"seqNr": n} for n in range(first, last + 1)]}


@pytest.mark.parametrize(
    ("method", "path", "payload", "code"),
    [
        ("PUT", "/snapshots/0", {"payload": 1}, ErrorCode.INVALID_SEQ_NR),
        ("PUT", "/snapshots/x", {"payload": 1}, ErrorCode.INVALID_SEQ_NR),
        ("PUT", "/snapshots/latest", {"payload": 1}, ErrorCode.INVALID_SEQ_NR),
        ("PUT", "/snapshots/1", {}, ErrorCode.INVALID_PAYLOAD),
        ("PUT", "/snapshots/1", {"payload": 1, "payloadText": "t"}, ErrorCode.INVALID_PAYLOAD),
        ("PUT", "/snapshots/1", {"payloadBinary": "a"}, ErrorCode.INVALID_PAYLOAD),
        ("PUT", "/snapshots/1", {"payload": 1, "seqNr": 1}, ErrorCode.INVALID_BODY),
        ("PUT", "/snapshots/1?x=1", {"payload": 1}, ErrorCode.INVALID_QUERY),
        ("GET", "/snapshots/latest?maxSeqNr=0", None, ErrorCode.INVALID_QUERY),
        ("GET", "/snapshots/latest?max=1", None, ErrorCode.INVALID_QUERY),
        ("DELETE", "/snapshots", None, ErrorCode.INVALID_QUERY),
        ("DELETE", "/snapshots?to=-1", None, ErrorCode.INVALID_QUERY),
    ],
)
async def test_bad_snapshot_requests_are_400(
    served: Served, method: str, path: str, payload: object, code: ErrorCode
) -> None:
    await call(served, "POST", journal_path("j", "/events"), json=events_body(1, 1))
    kwargs = {} if payload is None else {"json": payload}
    assert await error_of(served, method, journal_path("j", path), **kwargs) == (400, code)


async def test_a_snapshot_beyond_the_journal_is_409_with_its_seq_nr(served: Served) -> None:
    await call(served, "POST", journal_path("j", "/events"), json=events_body(1, 2))
    status, body, _ = await call(
        served, "PUT", journal_path("j", "/snapshots/3"), json={"payload": 1}
    )
    assert status == 409
    assert body["error"]["code"] == ErrorCode.SNAPSHOT_BEYOND_JOURNAL  # type: ignore[index]
    assert body["error"]["seqNr"] == 2  # type: ignore[index]


async def test_snapshot_bodies_may_pass_the_api_limit_up_to_the_snapshots(served: Served) -> None:
    await call(served, "POST", journal_path("j", "/events"), json=events_body(1, 1))
    path = journal_path("j", "/snapshots/1")
    at_limit = {"payloadBinary": base64.b64encode(b"x" * SNAPSHOT_LIMIT).decode()}
    assert (await call(served, "PUT", path, json=at_limit))[0] == 200  # 4000 bytes of base64
    over = {"payloadText": "x" * (SNAPSHOT_LIMIT + 1)}
    assert await error_of(served, "PUT", path, json=over) == (413, ErrorCode.SNAPSHOT_TOO_LARGE)
    huge = {"payloadText": "x" * 80_000}  # past the route's body limit: base64 of the limit
    assert await error_of(served, "PUT", path, json=huge) == (413, ErrorCode.BODY_TOO_LARGE)
    # the API's own limit (10,000 bytes here) still holds everywhere else
    big_append = {"events": [{"seqNr": 2, "payloadText": "x" * 20_000}]}
    assert await error_of(served, "POST", journal_path("j", "/events"), json=big_append) == (
        413,
        ErrorCode.BODY_TOO_LARGE,
    )


# --- readiness and failures of the core ------------------------------------------------------


async def test_not_ready_is_503_with_retry_after(served: Served, backend: FakeBackend) -> None:
    backend.is_ready = False
    for method, path, kwargs in JOURNAL_REQUESTS:
        status, body, headers = await call(served, method, path, **kwargs)
        assert status == 503 and headers["Retry-After"] == "3", (method, path)
        assert body["error"]["code"] == ErrorCode.NOT_READY  # type: ignore[index]
    assert (await error_of(served, "GET", "/readyz")) == (503, ErrorCode.NOT_READY)
    assert (await call(served, "GET", "/healthz"))[:2] == (200, {"status": "ok"})
    backend.is_ready = True
    assert (await call(served, "GET", "/readyz"))[:2] == (200, {"status": "ready"})


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        (JournalTruncated("offsets 0..9 expired"), 410, ErrorCode.JOURNAL_TRUNCATED),
        (JournalErased("journal 'j' is erased"), 410, ErrorCode.JOURNAL_ERASED),
        (StoreUnavailable("Cassandra: NoHostAvailable"), 503, ErrorCode.UNAVAILABLE),
        (KafkaUnavailable("partition 3 stuck"), 503, ErrorCode.UNAVAILABLE),
        (
            UndecodableBatch("the batch at offset 5 cannot be decoded"),
            503,
            ErrorCode.UNDECODABLE_RECORDS,
        ),
        # an event that does not open with its journal's key: stored data, not a bug
        (EnvelopeRefused("sealed by another data key"), 503, ErrorCode.UNDECODABLE_RECORDS),
        (TimeoutError(), 503, ErrorCode.UNAVAILABLE),
        # a path that does not follow a grow yet (a moved journal's snapshots, say): not a 500
        (JournalMoved("t/j", 7), 503, ErrorCode.UNAVAILABLE),
        (OutcomeUnknown("the verdict was not read"), 503, ErrorCode.OUTCOME_UNKNOWN),
        (IdempotencyKeyReused("k"), 422, ErrorCode.IDEMPOTENCY_KEY_REUSED),
        (IdempotencyUnresolved("k"), 422, ErrorCode.IDEMPOTENCY_KEY_UNRESOLVED),
        (AppendTooLarge("2 MB"), 413, ErrorCode.APPEND_TOO_LARGE),
        # aiohttp's client errors reach here only from a call to another worker that nothing
        # classified (the forwarder does, see tests/app/test_forwarding.py): outcome unknown
        (aiohttp.ServerDisconnectedError(), 503, ErrorCode.OUTCOME_UNKNOWN),
        (aiohttp.ClientOSError(104, "Connection reset by peer"), 503, ErrorCode.OUTCOME_UNKNOWN),
        (aiohttp.ClientPayloadError("cut short"), 503, ErrorCode.OUTCOME_UNKNOWN),
        (aiohttp.ConnectionTimeoutError(), 503, ErrorCode.OUTCOME_UNKNOWN),
        (RuntimeError("a bug"), 500, ErrorCode.INTERNAL_ERROR),
    ],
)
async def test_core_failures_become_statuses(
    served: Served, backend: FakeBackend, failure: BaseException, status: int, code: ErrorCode
) -> None:
    backend.failure = failure
    for method, path, kwargs in JOURNAL_REQUESTS:
        got_status, body, headers = await call(served, method, path, **kwargs)
        assert (got_status, body["error"]["code"]) == (status, code), (method, path)  # type: ignore[index]
        assert ("Retry-After" in headers) == (status == 503)
    backend.failure = None
    assert (await call(served, "GET", journal_path("j")))[0] == 200


async def test_a_grow_this_process_does_not_follow_is_a_503(
    served: Served, backend: FakeBackend
) -> None:
    """A core that does not follow a grow (one without a tail index, docs/growing.md): every
    journal request answers 503 with Retry-After, never 500."""
    backend.failure = TopicGrown("t", "t.6", "created", "a core without a tail index")
    for method, path, kwargs in JOURNAL_REQUESTS:
        got_status, _, headers = await call(served, method, path, **kwargs)
        assert got_status == 503 and "Retry-After" in headers, (method, path)


@pytest.mark.parametrize("repeatable", [True, False])
async def test_an_unknown_outcome_says_whether_the_append_is_safe_to_repeat(
    served: Served, backend: FakeBackend, repeatable: bool
) -> None:
    """Issue 38 item 6: an unkeyed append at the end (the core says it is not repeatable) is
    told to read the journal and to send an Idempotency-Key, not to repeat."""
    backend.failure = OutcomeUnknown("the verdict was not read", repeatable=repeatable)
    at_end = {"events": [{"payload": 1}]}
    status, body, headers = await call(served, "POST", journal_path("u", "/events"), json=at_end)
    assert (status, body["error"]["code"], "Retry-After" in headers) == (  # type: ignore[index]
        503,
        ErrorCode.OUTCOME_UNKNOWN,
        True,
    )
    message = body["error"]["message"]  # type: ignore[index]
    assert ("not safe to repeat" in message) == (not repeatable), message
    assert ("retry with the same Idempotency-Key" in message) == repeatable, message


async def test_a_conditional_append_on_another_seq_nr_is_409_with_it(served: Served) -> None:
    def body(first: int, expected: int) -> dict[str, object]:
        return {"json": {"events": [{"seqNr": first}], "expectedSeqNr": expected}}

    path = journal_path("c", "/events")
    assert (await call(served, "POST", path, **body(1, 0)))[:2] == (
        200,
        {"partition": 0, "offset": 0, "seqNr": {"from": 1, "to": 1}},
    )
    status, answer, headers = await call(served, "POST", path, **body(1, 0))
    assert status == 409 and "Retry-After" not in headers
    error = answer["error"]
    assert isinstance(error, dict) and error.pop("message")
    assert error == {"code": ErrorCode.SEQ_NR_CONFLICT, "seqNr": 1}
    # an expectation the events cannot meet, a bad key, a reserved header: 400, nothing written
    assert await error_of(served, "POST", path, **body(3, 1)) == (400, ErrorCode.INVALID_SEQ_NR)
    assert await error_of(served, "POST", path, **body(1, -1)) == (400, ErrorCode.INVALID_SEQ_NR)
    for key in ("", "x" * 256):
        refused = await error_of(
            served, "POST", path, headers={"Idempotency-Key": key}, **body(2, 1)
        )
        assert refused == (400, ErrorCode.INVALID_IDEMPOTENCY_KEY)
    reserved = {"events": [{"seqNr": 2}], "headers": {"journal.idempotency-key": "k"}}
    assert await error_of(served, "POST", path, json=reserved) == (400, ErrorCode.INVALID_HEADERS)
    assert (await call(served, "GET", journal_path("c")))[1]["seqNr"] == 1


async def test_a_plain_append_that_does_not_continue_the_journal_is_409_unless_ack_kafka(
    served: Served, backend: FakeBackend
) -> None:
    path = journal_path("v", "/events")
    two = {"events": [{"seqNr": 1}, {"seqNr": 2}]}
    answer = {"partition": 0, "offset": 0, "seqNr": {"from": 1, "to": 2}}
    assert (await call(served, "POST", path, json=two))[:2] == (200, answer)
    status, body, _ = await call(served, "POST", path, json={"events": [{"seqNr": 5}]})
    assert (status, body["error"]["seqNr"]) == (409, 2)  # type: ignore[index]
    assert backend.acks == [Ack.VERIFIED]  # verified by default; the 409 wrote nothing
    # the old mode, per request: answered at Kafka's acknowledgement, the fold unseen
    status, body, _ = await call(
        served, "POST", f"{path}?ack=kafka", json={"events": [{"seqNr": 3}]}
    )
    assert (status, body["seqNr"]) == (200, {"from": 3, "to": 3})
    assert backend.acks == [Ack.VERIFIED, Ack.KAFKA]
    assert await error_of(served, "POST", f"{path}?ack=all", json=two) == (
        400,
        ErrorCode.INVALID_QUERY,
    )


async def test_events_without_seq_nrs_are_appended_at_the_end_and_told_their_seq_nrs(
    served: Served, backend: FakeBackend
) -> None:
    path = journal_path("e", "/events")
    first = await call(served, "POST", path, json={"events": [{"payload": 1}, {"payload": 2}]})
    assert first[:2] == (200, {"partition": 0, "offset": 0, "seqNr": {"from": 1, "to": 2}})
    second = await call(served, "POST", path, json={"events": [{"payloadText": "t"}]})
    assert second[:2] == (200, {"partition": 0, "offset": 2, "seqNr": {"from": 3, "to": 3}})
    assert [r.event for r in backend.records["e"]] == [
        Event(1, payload=JsonPayload(b"1")),
        Event(2, payload=JsonPayload(b"2")),
        Event(3, payload=TextPayload("t")),
    ]
    # "at the end if the journal is still at n"
    at_3 = {"events": [{}], "expectedSeqNr": 3}
    assert (await call(served, "POST", path, json=at_3))[1]["seqNr"] == {"from": 4, "to": 4}
    status, body, _ = await call(served, "POST", path, json=at_3)
    assert (status, body["error"]["seqNr"]) == (409, 4)  # type: ignore[index]
    # numbered by the journal: only a verified answer can tell the seqNrs; mixing is refused
    refused = await error_of(served, "POST", f"{path}?ack=kafka", json={"events": [{}]})
    assert refused == (400, ErrorCode.INVALID_SEQ_NR)
    mixed = {"events": [{"seqNr": 5}, {}]}
    assert await error_of(served, "POST", path, json=mixed) == (400, ErrorCode.INVALID_SEQ_NR)
    assert [r.seq_nr for r in backend.records["e"]] == [1, 2, 3, 4]


async def test_a_failure_mid_stream_breaks_the_body(
    served: Served, backend: FakeBackend, metrics: Metrics
) -> None:
    await call(
        served,
        "POST",
        journal_path("j", "/events"),
        json={"events": [{"seqNr": n} for n in range(1, 6)]},
    )
    backend.break_after = 3
    lines: list[bytes] = []
    with pytest.raises(aiohttp.ClientPayloadError):
        async with served.session.get(served.at(journal_path("j", "/events"))) as response:
            assert response.status == 200
            async for line in response.content:
                lines.append(line)
    assert [orjson.loads(line)["seqNr"] for line in lines] == [1, 2, 3]
    assert metrics.value("kafka_journal_http_streams_interrupted_total") == 1
    assert metrics.value("kafka_journal_http_streamed_events_total") == 3
    backend.break_after = None
    assert (await call(served, "GET", journal_path("j")))[0] == 200


# --- HTTP-level errors ------------------------------------------------------------------------


async def test_unknown_routes_are_json_404(served: Served) -> None:
    for path in ("/", "/nope", "/journals/", "/journals/j/events/1"):
        assert await error_of(served, "GET", path) == (404, ErrorCode.NOT_FOUND), path


async def test_wrong_methods_are_json_405_with_allow(served: Served) -> None:
    status, body, headers = await call(served, "PUT", journal_path("j", "/events"))
    assert (status, body["error"]["code"]) == (405, ErrorCode.METHOD_NOT_ALLOWED)  # type: ignore[index]
    assert headers["Allow"] == "DELETE, GET, POST"
    assert await error_of(served, "POST", "/healthz") == (405, ErrorCode.METHOD_NOT_ALLOWED)
    # no HEAD: it would run a whole read for nothing (and a HEAD answer has no body to check)
    assert (await call(served, "HEAD", journal_path("j", "/events")))[0] == 405


async def test_bodies_over_the_limit_are_413_declared_or_not(served: Served) -> None:
    big = orjson.dumps({"events": [{"seqNr": 1, "payloadText": "x" * 20_000}]})
    path = journal_path("j", "/events")
    assert await error_of(served, "POST", path, data=big) == (413, ErrorCode.BODY_TOO_LARGE)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked encoding
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    assert await error_of(served, "POST", path, data=chunks()) == (413, ErrorCode.BODY_TOO_LARGE)
    assert (await call(served, "POST", path, json=APPEND["json"]))[0] == 200


# --- metrics, OpenAPI, mounting ---------------------------------------------------------------


async def test_requests_are_counted_and_timed_by_route_template(
    served: Served, metrics: Metrics
) -> None:
    route = {"method": "GET", "route": "/journals/{id}"}
    for n in range(3):
        await call(served, "GET", journal_path(f"id-{n}"))
    await call(served, "GET", "/nope")
    assert metrics.value("kafka_journal_http_requests_total", status="200", **route) == 3
    assert metrics.value("kafka_journal_http_request_duration_seconds_count", **route) == 3
    assert metrics.value("kafka_journal_http_request_duration_seconds_sum", **route) > 0
    async with served.session.get(served.at("/metrics")) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    assert (
        'kafka_journal_http_requests_total{method="GET",route="/journals/{id}",status="200"} 3.0'
        in text
    )
    assert (
        "kafka_journal_http_request_duration_seconds_bucket"
        '{le="+Inf",method="GET",route="/journals/{id}"} 3.0' in text
    )
    assert 'route="unmatched",status="404"' in text
    assert "id-0" not in text


async def test_reads_are_timed_to_their_first_event(served: Served, metrics: Metrics) -> None:
    await call(served, "POST", journal_path("j", "/events"), json=APPEND["json"])
    for _ in range(2):
        assert (await call(served, "GET", journal_path("j", "/events")))[0] == 200
    assert metrics.value("kafka_journal_read_duration_seconds_count") == 2


def routes_of(app: web.Application) -> set[tuple[str, str]]:
    return {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }


def test_openapi_describes_every_route_and_every_error_code(backend: FakeBackend) -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    described = {
        (method, path)
        for path, item in document["paths"].items()
        for method in item
        if method != "parameters"
    }
    routes = routes_of(create_app(backend))
    assert routes and routes <= described
    assert described <= routes  # and nothing that does not exist
    codes = document["components"]["schemas"]["ErrorCode"]["enum"]
    assert set(codes) == {code.value for code in ErrorCode}


async def test_routes_mount_onto_an_existing_app(backend: FakeBackend) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    host = web.Application()
    host.router.add_get("/hello", hello)
    add_routes(host, backend)
    async with serve(host) as served:
        async with served.session.get(served.at("/hello")) as response:
            assert await response.text() == "hi"
        assert (await call(served, "GET", journal_path("j")))[0] == 200
        assert await error_of(served, "GET", "/elsewhere") == (404, ErrorCode.NOT_FOUND)


async def test_a_subscription_is_measured_apart_from_request_latency(
    served: Served, backend: FakeBackend, metrics: Metrics
) -> None:
    """A live subscription lasts hours: in the request latency histogram it would land far
    beyond its top bucket; it is counted as a request, and timed in a histogram of its own."""
    backend.records["j"] = [EventRecord(Event(1, frozenset(), TextPayload("x")), T0, 0, 1)]
    async with served.session.get(served.at("/events?live=false")) as response:
        assert response.status == 200
        await response.read()
    route = {"method": "GET", "route": "/events"}
    assert metrics.value("kafka_journal_http_requests_total", status="200", **route) == 1
    assert metrics.value("kafka_journal_http_request_duration_seconds_count", **route) == 0
    lasted = "kafka_journal_http_subscription_duration_seconds_count"
    assert metrics.value(lasted, status="200") == 1
    assert metrics.value("kafka_journal_http_subscriptions_open") == 0
    await call(served, "GET", journal_path("j"))  # other routes are still timed as requests
    timed = {"method": "GET", "route": "/journals/{id}"}
    assert metrics.value("kafka_journal_http_request_duration_seconds_count", **timed) == 1


async def test_each_answer_names_its_request_id_the_clients_own_if_plain(served: Served) -> None:
    _, _, headers = await call(served, "GET", "/healthz", headers={"X-Request-Id": "abc-1.2:3"})
    assert headers["X-Request-Id"] == "abc-1.2:3"
    _, _, headers = await call(served, "GET", "/nope")  # errors too
    generated = headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    _, _, headers = await call(served, "GET", "/healthz")
    assert headers["X-Request-Id"] != generated
    for unfit in ("has space", "x" * 129, 'quote"d'):
        _, _, headers = await call(served, "GET", "/healthz", headers={"X-Request-Id": unfit})
        assert re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-Id"]), unfit
