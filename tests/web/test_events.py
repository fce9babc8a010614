"""`GET /events` as server-sent events and with a prefix, `GET /status`, `GET /quarantine`,
and the console's files (`/ui`), over the fake backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest

from journal.errors import KafkaUnavailable
from journal.metrics import Metrics, set_replication_lag
from journal.replication.quarantine import Quarantined
from journal.subscriptions.subscription import SubscriptionPosition
from tests.support.fake_backend import FakeBackend
from tests.support.http_api import journal_path
from tests.web.served import Served, serve
from web.app import create_app
from web.error_answers import ErrorCode

SSE = {"Accept": "text/event-stream"}


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def served(metrics: Metrics, backend: FakeBackend) -> AsyncIterator[Served]:
    async with serve(create_app(backend, metrics=metrics)) as served:
        for journal_id, seq_nr in (("a-1", 1), ("a-1", 2), ("a-1", 3), ("b-1", 1)):
            body = {"events": [{"seqNr": seq_nr, "payload": {"n": seq_nr}, "tags": ["t"]}]}
            path = served.at(journal_path(journal_id, "/events"))
            async with served.session.post(path, json=body) as answer:
                assert answer.status == 200, await answer.text()
        yield served


def messages(text: str) -> list[dict[str, str]]:
    """SSE messages as a browser parses them: fields by name, comments under ':'."""
    parsed = []
    for block in text.split("\n\n"):
        if not block:
            continue
        message: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            message[name] = value.strip()
        parsed.append(message)
    return parsed


async def event_stream(
    served: Served, query: str = "", headers: dict[str, str] | None = None
) -> list[dict[str, str]]:
    async with served.session.get(
        served.at(f"/events{query}"), headers={**SSE, **(headers or {})}
    ) as answer:
        assert answer.status == 200, await answer.text()
        assert answer.content_type == "text/event-stream"
        return messages(await answer.text())


async def test_events_stream_as_sse_with_positions_as_ids_and_heartbeats_as_comments(
    served: Served,
) -> None:
    stream = await event_stream(served, "?prefix=a-")
    events = [m for m in stream if "data" in m]
    assert [orjson.loads(m["data"])["seqNr"] for m in events] == [1, 2, 3]
    for message in events:
        assert message["id"] == orjson.loads(message["data"])["position"]
    heartbeat = stream[-1]
    assert "" in heartbeat and heartbeat[""] == "hb" and "data" not in heartbeat
    assert "id" in heartbeat  # its position (the fake's: where it started)


async def test_last_event_id_resumes_after_it_and_wins_over_after(served: Served) -> None:
    first = [m for m in await event_stream(served, "?prefix=a-") if "data" in m]
    resumed = await event_stream(served, "?prefix=a-", {"Last-Event-ID": first[1]["id"]})
    assert [orjson.loads(m["data"])["seqNr"] for m in resumed if "data" in m] == [3]
    both = await event_stream(
        served, f"?prefix=a-&after={first[0]['id']}", {"Last-Event-ID": first[1]["id"]}
    )
    assert [orjson.loads(m["data"])["seqNr"] for m in both if "data" in m] == [3]


async def test_after_end_starts_after_what_the_topic_holds_and_last_event_id_wins(
    served: Served, backend: FakeBackend
) -> None:
    from_end = await event_stream(served, "?after=end")
    assert [m for m in from_end if "data" in m] == []  # nothing of what was there
    end = max(r.offset for records in backend.records.values() for r in records)
    assert from_end[-1]["id"] == SubscriptionPosition.of({0: end}).encode()
    first = [m for m in await event_stream(served, "?prefix=a-") if "data" in m]
    resumed = await event_stream(served, "?prefix=a-&after=end", {"Last-Event-ID": first[1]["id"]})
    assert [orjson.loads(m["data"])["seqNr"] for m in resumed if "data" in m] == [3]


async def test_after_end_without_kafka_is_a_503(served: Served, backend: FakeBackend) -> None:
    backend.failure = KafkaUnavailable("no broker")
    async with served.session.get(served.at("/events?after=end"), headers=SSE) as answer:
        assert answer.status == 503 and "Retry-After" in answer.headers


async def test_a_bad_last_event_id_is_a_400(served: Served) -> None:
    async with served.session.get(
        served.at("/events"), headers={**SSE, "Last-Event-ID": "not a position"}
    ) as answer:
        body = await answer.json()
    assert answer.status == 400 and body["error"]["code"] == ErrorCode.INVALID_QUERY
    assert "Last-Event-ID" in body["error"]["message"]


async def test_ndjson_stays_the_default_and_takes_the_prefix_too(served: Served) -> None:
    async with served.session.get(served.at("/events?prefix=b-")) as answer:
        assert answer.content_type == "application/x-ndjson"
        lines = [orjson.loads(line) for line in (await answer.text()).splitlines()]
    assert [line["id"] for line in lines if "id" in line] == ["b-1"]
    assert lines[-1]["heartbeat"] is True


async def test_status_sums_what_the_metrics_say(served: Served, metrics: Metrics) -> None:
    set_replication_lag(metrics, "topic", 2, 7, 1.5)
    set_replication_lag(metrics, "topic", 0, 0, 0.0)
    metrics.counter("kafka_journal_quarantined_records_total", topic="topic").inc(3)
    async with served.session.get(served.at("/nope")) as answer:
        assert answer.status == 404
    async with served.session.get(served.at("/status")) as answer:
        assert answer.status == 200
        status = await answer.json()
    assert status["partitions"] == [
        {"partition": 0, "lagRecords": 0, "lagSeconds": 0.0},
        {"partition": 2, "lagRecords": 7, "lagSeconds": 1.5},
    ]
    assert status["quarantinedRecords"] == 3
    assert status["requests"] == 5  # the four appends and the 404, answered before this one
    assert (status["clientErrors"], status["serverErrors"]) == (1, 0)
    assert status["subscriptionsOpen"] == 0


async def test_status_lists_the_groups_workers_with_their_partitions(
    served: Served, backend: FakeBackend
) -> None:
    async with served.session.get(served.at("/status")) as answer:
        assert (await answer.json())["workers"] == []  # not known
    backend.group = {"http://a:6066": (0, 2), "http://b:6066": (1,)}
    async with served.session.get(served.at("/status")) as answer:
        workers = (await answer.json())["workers"]
    assert workers == [
        {"url": "http://a:6066", "partitions": [0, 2]},
        {"url": "http://b:6066", "partitions": [1]},
    ]


def quarantined(offset: int, origin: str | None, replayed: bool = False) -> Quarantined:
    return Quarantined(
        partition=0,
        offset=offset,
        topic="topic",
        origin=origin,
        reason=f"reason {offset}",
        timestamp_ms=1_700_000_000_000 + offset,
        key=b"j-1",
        value=b"?",
        headers=[],
        replayed=replayed,
    )


async def test_quarantine_lists_the_newest_records_first(
    served: Served, backend: FakeBackend
) -> None:
    backend.quarantine = [quarantined(n, f"2:{40 + n}", replayed=n == 1) for n in range(5)]
    backend.quarantine.append(quarantined(5, "1:7-9"))  # an undecodable batch's marker
    async with served.session.get(served.at("/quarantine?limit=3")) as answer:
        assert answer.status == 200, await answer.text()
        body = await answer.json()
    assert body["total"] == 6
    assert [record["offset"] for record in body["records"]] == [5, 4, 3]
    assert body["records"][0]["originOffset"] == "7-9"
    assert body["records"][1] == {
        "partition": 0,
        "offset": 4,
        "originPartition": 2,
        "originOffset": "44",
        "reason": "reason 4",
        "timestamp": "2023-11-14T22:13:20.004Z",
        "key": "j-1",
        "replayed": False,
    }
    async with served.session.get(served.at("/quarantine")) as answer:
        records = (await answer.json())["records"]
    assert len(records) == 6 and [r["replayed"] for r in records].count(True) == 1


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "offset=1"])
async def test_quarantine_refuses_a_bad_query(served: Served, query: str) -> None:
    async with served.session.get(served.at(f"/quarantine?{query}")) as answer:
        assert answer.status == 400
        assert (await answer.json())["error"]["code"] == ErrorCode.INVALID_QUERY


async def test_quarantine_is_unavailable_while_not_ready_or_kafka_is_down(
    served: Served, backend: FakeBackend
) -> None:
    backend.is_ready = False
    async with served.session.get(served.at("/quarantine")) as answer:
        assert answer.status == 503 and "Retry-After" in answer.headers
    backend.is_ready, backend.failure = True, KafkaUnavailable("down")
    async with served.session.get(served.at("/quarantine")) as answer:
        assert answer.status == 503
        assert (await answer.json())["error"]["code"] == ErrorCode.UNAVAILABLE


async def test_the_console_is_served_with_a_strict_content_policy(served: Served) -> None:
    async with served.session.get(served.at("/ui")) as answer:
        assert answer.status == 200 and answer.content_type == "text/html"
        assert '<script type="module" src="/ui/app.js">' in await answer.text()
        assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
    async with served.session.get(served.at("/ui/app.js")) as answer:
        assert answer.status == 200 and answer.content_type == "text/javascript"
    async with served.session.get(served.at("/ui/secrets.txt")) as answer:
        assert answer.status == 404
        assert (await answer.json())["error"]["code"] == ErrorCode.NOT_FOUND


async def test_a_batch_of_other_journals_events_moves_the_position_on(served: Served) -> None:
    # the fake yields a batch per journal: b-1's, all left out, comes as a heartbeat
    async with served.session.get(served.at("/events?prefix=a-")) as answer:
        lines = [orjson.loads(line) for line in (await answer.text()).splitlines()]
    assert [line.get("seqNr") for line in lines] == [1, 2, 3, None, None]
    assert lines[3] == {"heartbeat": True, "position": lines[3]["position"]}
    assert lines[3]["position"] != lines[2]["position"]
