"""Conditional appends and idempotent retries through a worker's HTTP API (a real process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import aiohttp
import orjson
import pytest
from yarl import URL

from journal.errors import SeqNrConflict
from tests.journal.journal_contract import events
from tests.support.harness import Harness, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import WorkerProcess, wait_replicated

pytestmark = pytest.mark.integration

Answer = tuple[int, dict[str, object]]


@pytest.fixture(scope="module")
def worker(connected: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        connected.settings, unique("app"), tmp_path_factory.mktemp("worker") / "data"
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
async def session(worker: WorkerProcess) -> AsyncIterator[aiohttp.ClientSession]:
    await worker.wait_ready()
    async with client_session(worker.settings) as one:
        yield one


def body(first: int, last: int, writer: str, expected: int | None = None) -> dict[str, object]:
    answer: dict[str, object] = {
        "events": [{"seqNr": n, "payload": {"writer": writer}} for n in range(first, last + 1)]
    }
    if expected is not None:
        answer["expectedSeqNr"] = expected
    return answer


async def post(
    session: aiohttp.ClientSession, url: URL, journal_id: str, sent: dict[str, object], **kw: str
) -> Answer:
    headers = {"Idempotency-Key": kw["key"]} if "key" in kw else {}
    target = url.with_path(journal_path(journal_id, "/events"), encoded=True)
    async with session.post(target, json=sent, headers=headers) as response:
        return response.status, orjson.loads(await response.read())


async def read(
    session: aiohttp.ClientSession, url: URL, journal_id: str
) -> list[tuple[int, object, int]]:
    """(seqNr, payload, offset) of every event."""
    async with session.get(url.with_path(journal_path(journal_id, "/events"), encoded=True)) as got:
        assert got.status == 200, await got.read()
        lines = [orjson.loads(line) async for line in got.content]
    return [(line["seqNr"], line["payload"], line["offset"]) for line in lines]


async def test_fifty_writers_expecting_an_empty_journal_have_one_winner(
    session: aiohttp.ClientSession, worker: WorkerProcess, connected: Harness
) -> None:
    journal_id = unique("contended")
    answers = await asyncio.gather(
        *(post(session, worker.url, journal_id, body(1, 2, f"w{n}", 0)) for n in range(50))
    )
    won = [(n, a) for n, (status, a) in enumerate(answers) if status == 200]
    lost = [a for status, a in answers if status == 409]
    assert len(won) == 1 and len(lost) == 49, sorted({status for status, _ in answers})
    assert {(e["code"], e["seqNr"]) for e in (a["error"] for a in lost)} == {  # type: ignore[index]
        ("seq_nr_conflict", 2)
    }
    ((winner, position),) = won
    only_the_winner = [(n, {"writer": f"w{winner}"}, position["offset"]) for n in (1, 2)]
    assert await read(session, worker.url, journal_id) == only_the_winner
    await wait_replicated(connected.settings, connected.journals.store)
    assert await read(session, worker.url, journal_id) == only_the_winner
    assert (await connected.stored(journal_id))[1] == [1, 2]


async def test_an_idempotent_retry_gets_the_first_answer_and_adds_nothing(
    session: aiohttp.ClientSession, worker: WorkerProcess, connected: Harness
) -> None:
    journal_id = unique("retried")
    first = await post(session, worker.url, journal_id, body(1, 2, "a", 0), key="k1")
    assert first[0] == 200
    assert await post(session, worker.url, journal_id, body(1, 2, "a", 0), key="k1") == first
    await wait_replicated(connected.settings, connected.journals.store)
    assert await post(session, worker.url, journal_id, body(1, 2, "a", 0), key="k1") == first
    status, reused = await post(session, worker.url, journal_id, body(1, 2, "b", 0), key="k1")
    assert (status, reused["error"]["code"]) == (422, "idempotency_key_reused")  # type: ignore[index]
    status, lost = await post(session, worker.url, journal_id, body(1, 2, "a", 0), key="k2")
    assert (status, lost["error"]["seqNr"]) == (409, 2)  # type: ignore[index]
    offset = first[1]["offset"]
    assert await read(session, worker.url, journal_id) == [
        (1, {"writer": "a"}, offset),
        (2, {"writer": "a"}, offset),
    ]
    # a plain append that continues the journal: verified by default, accepted
    assert (await post(session, worker.url, journal_id, body(3, 3, "c")))[0] == 200
    assert [seq_nr for seq_nr, _, _ in await read(session, worker.url, journal_id)] == [1, 2, 3]


async def test_the_direct_client_and_a_worker_take_the_same_verdicts(
    session: aiohttp.ClientSession, worker: WorkerProcess, connected: Harness
) -> None:
    """Two processes, each with its own lock and memory: the log still has one winner."""
    journal_id = unique("mixed")
    journal = connected.journals.journal(journal_id)
    await journal.append(events(1, 1), expected_seq_nr=0)
    status, lost = await post(session, worker.url, journal_id, body(1, 1, "http", 0))
    assert (status, lost["error"]["seqNr"]) == (409, 1)  # type: ignore[index]
    assert (await post(session, worker.url, journal_id, body(2, 2, "http", 1)))[0] == 200
    with pytest.raises(SeqNrConflict) as conflict:  # the client still believes it is at 1
        await journal.append(events(2, 3), expected_seq_nr=1)
    assert conflict.value.seq_nr == 2
    assert [r.seq_nr async for r in journal.read()] == [1, 2]


async def test_a_plain_append_that_does_not_continue_the_journal_is_409_and_never_seen(
    session: aiohttp.ClientSession, worker: WorkerProcess, connected: Harness
) -> None:
    journal_id = unique("plain")
    status, first = await post(session, worker.url, journal_id, body(1, 2, "a"))
    assert (status, first["seqNr"]) == (200, {"from": 1, "to": 2})
    for gap_or_over in (body(4, 4, "b"), body(2, 3, "b")):
        status, lost = await post(session, worker.url, journal_id, gap_or_over)
        assert (status, lost["error"]["code"], lost["error"]["seqNr"]) == (  # type: ignore[index]
            409,
            "seq_nr_conflict",
            2,
        )
    offset = first["offset"]
    only_the_first = [(1, {"writer": "a"}, offset), (2, {"writer": "a"}, offset)]
    assert await read(session, worker.url, journal_id) == only_the_first
    await wait_replicated(connected.settings, connected.journals.store)
    assert await read(session, worker.url, journal_id) == only_the_first
    assert (await connected.stored(journal_id))[1] == [1, 2]


async def test_eight_writers_appending_at_the_end_through_a_worker_get_contiguous_ranges(
    session: aiohttp.ClientSession, worker: WorkerProcess
) -> None:
    journal_id = unique("at-end")
    target = worker.url.with_path(journal_path(journal_id, "/events"), encoded=True)

    async def writer(n: int) -> list[tuple[int, int, int]]:
        got = []
        for step in range(10):
            sent = {"events": [{"payload": {"writer": n, "step": step, "i": i}} for i in range(3)]}
            async with session.post(target, json=sent) as response:
                answer = orjson.loads(await response.read())
                assert response.status == 200, answer
            got.append((answer["seqNr"]["from"], answer["seqNr"]["to"], answer["offset"]))
        return got

    answers = await asyncio.gather(*(writer(n) for n in range(8)))
    lines = await read(session, worker.url, journal_id)
    assert [seq_nr for seq_nr, _, _ in lines] == list(range(1, 8 * 10 * 3 + 1))
    for n, got in enumerate(answers):
        for step, (low, high, offset) in enumerate(got):
            held = [(seq_nr, payload) for seq_nr, payload, at in lines if at == offset]
            assert held == [(low + i, {"writer": n, "step": step, "i": i}) for i in range(3)], (
                n,
                step,
            )
            assert high == low + 2
