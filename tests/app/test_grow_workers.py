"""Two workers across two grows (docs/growing.md, issue 40 stage 3) on the real servers:
verified appends, appends at the end, `ack=kafka` appends, a delete and reads go on over HTTP
(each request to the other worker than the last, so half are forwarded) while the command
grows the topic from 3 to 6 partitions, then 6 to 12. Every acknowledged append is read back
exactly once, reads never miss an append acknowledged before they started, no answer is a 500
(a 503 only with Retry-After), a subscription group streamed from the workers delivers every
acknowledged append across both grows, and with the workers stopped a fresh direct client
reads the same. Once more with one worker killed -9 at the first Seal and restarted with its
identity, the deployment encrypting: each journal keeps one data key, under the first topic,
along the chain."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Sequence

import aiohttp
import orjson
import pytest
from pydantic import SecretStr
from yarl import URL

from app.grow import grow_topic
from journal.client.journals import Journals
from journal.codec import new_kek_text
from journal.core.grow import Phase
from journal.core.model import Event, JournalKey, TextPayload
from journal.errors import Unavailable
from journal.kafka.topic import end_offsets
from journal.replication.replicate import wait_replicated as wait_pointers
from journal.store.cassandra import CassandraStore
from journal.store.keys import CassandraKeyStore, KeyState, keyspace_access_of
from stack import Stack
from tests.support.eventually import WITHIN_S, eventually
from tests.support.harness import expire_all, settings_for, unique
from tests.support.http_api import client_session, journal_path
from tests.support.workers import (
    WorkerProcess,
    metric,
    running_workers,
    wait_replicated,
    wait_settled,
)

pytestmark = pytest.mark.integration

VERIFIED = [f"v{n}" for n in range(4)]
AT_END = [f"e{n}" for n in range(2)]
KAFKA = [f"k{n}" for n in range(2)]
CALL_BOUND_S = 120.0  # a call retried this long still unanswered fails: a hang detector, not a goal
RETRY_PAUSE_S = 0.2  # at most, between tries: a 503's Retry-After, or a worker being restarted


@pytest.fixture(scope="module")
async def store(stack: Stack, keyspace: str) -> AsyncIterator[CassandraStore]:
    connected = await CassandraStore.connect(settings_for(stack, "x", keyspace).cassandra_config())
    yield connected
    await connected.close()


class Api:
    """HTTP over the workers in turn; a 503 must carry Retry-After and is retried (bounded),
    any other answer but 200 fails the test."""

    def __init__(self, session: aiohttp.ClientSession, urls: Sequence[URL]) -> None:
        self._session = session
        self._urls = itertools.cycle(urls)
        self.unavailable = 0
        self.broken = 0  # calls that met a killed worker
        self.slowest_s = 0.0  # the longest call, its retries included: printed, not asserted

    async def call(self, method: str, path: str, **kwargs: object) -> bytes:
        started = time.monotonic()
        try:
            return await self._call(method, path, **kwargs)
        finally:
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)

    async def _call(self, method: str, path: str, **kwargs: object) -> bytes:
        deadline = time.monotonic() + CALL_BOUND_S
        while time.monotonic() < deadline:
            url = next(self._urls).with_path(path, encoded=True)
            try:
                async with self._session.request(method, url, **kwargs) as answer:  # type: ignore[arg-type]
                    body = await answer.read()
                    if answer.status != 503:
                        assert answer.status == 200, f"{method} {path}: {answer.status} {body!r}"
                        return body
                    assert "Retry-After" in answer.headers, body
                    self.unavailable += 1
                    pause = min(float(answer.headers["Retry-After"]), RETRY_PAUSE_S)
            except aiohttp.ClientError:  # a worker killed (mid-answer too): keyed calls retried
                self.broken += 1
                pause = RETRY_PAUSE_S
            await asyncio.sleep(pause)  # as a client honours Retry-After (capped)
        raise AssertionError(f"{method} {path}: unanswered for {CALL_BOUND_S} s")

    async def append(
        self,
        journal_id: str,
        text: str,
        seq_nr: int | None = None,
        *,
        kafka: bool = False,
        expected: int | None = None,
    ) -> int:
        """Append one text event (at the end without `seq_nr`); its seqNr. Keyed (by its text)
        unless `kafka`: a retry after an unknown outcome finds its first attempt."""
        event: dict[str, object] = {"payloadText": text}
        if seq_nr is not None:
            event["seqNr"] = seq_nr
        request: dict[str, object] = {"events": [event]}
        if expected is not None:
            request["expectedSeqNr"] = expected
        headers = {"Content-Type": "application/json"}
        if not kafka:
            headers["Idempotency-Key"] = text
        path = journal_path(journal_id, "/events") + ("?ack=kafka" if kafka else "")
        body = await self.call("POST", path, data=orjson.dumps(request), headers=headers)
        first: int = orjson.loads(body)["seqNr"]["from"]
        return first

    async def texts(self, journal_id: str) -> dict[int, str]:
        """The journal's events read (seqNr -> text), each once and in order."""
        body = await self.call("GET", journal_path(journal_id, "/events"))
        lines = [orjson.loads(line) for line in body.splitlines() if line]
        seq_nrs = [line["seqNr"] for line in lines]
        assert seq_nrs == sorted(set(seq_nrs)), f"{journal_id}: {seq_nrs} not increasing, once"
        return {line["seqNr"]: line["payloadText"] for line in lines}


class GroupStream:
    """A subscription group's member over HTTP on one worker, then on the next when its stream
    breaks (a worker killed): every event it gets, each acknowledged on the worker that
    streams it."""

    def __init__(self, session: aiohttp.ClientSession, urls: Sequence[URL], name: str) -> None:
        self._session = session
        self._urls = itertools.cycle(urls)
        self._name = name
        self.got: set[tuple[str, int]] = set()
        self.streams = 0

    async def run(self) -> None:
        while True:
            url = next(self._urls)
            # a broken stream (its worker killed): the group goes on from the checkpoint
            with contextlib.suppress(aiohttp.ClientError):
                await self._stream(url)
            await asyncio.sleep(RETRY_PAUSE_S)  # as a client reconnects

    async def _stream(self, url: URL) -> None:
        events = url.with_path(f"/subscriptions/{self._name}/events")
        acks = url.with_path(f"/subscriptions/{self._name}/ack")
        async with self._session.get(events) as answer:
            if answer.status == 503:
                return
            assert answer.status == 200, await answer.text()
            self.streams += 1
            while line := await answer.content.readline():
                item = orjson.loads(line)
                if item == {"heartbeat": True}:
                    continue
                self.got.add((item["id"], item["seqNr"]))
                async with self._session.post(acks, json={"positions": [item["position"]]}) as ack:
                    assert ack.status in (200, 409), await ack.text()  # 409: member gone


def acknowledge(acked: dict[str, dict[int, str]], journal_id: str, seq_nr: int, text: str) -> None:
    seen = acked.setdefault(journal_id, {})
    assert seq_nr not in seen, f"{journal_id}: seqNr {seq_nr} acknowledged twice"
    seen[seq_nr] = text


@pytest.mark.parametrize(
    "kill", [False, True], ids=["", "encrypting, a worker killed -9 at the first Seal"]
)
async def test_workers_serve_appends_and_reads_while_the_topic_grows(
    stack: Stack,
    keyspace: str,
    store: CassandraStore,
    tmp_path_factory: pytest.TempPathFactory,
    kill: bool,
) -> None:
    settings = settings_for(stack, unique("journal_grow_workers"), keyspace, 3)
    # the second run encrypts too: the chain of three topics with one key per journal
    kek = new_kek_text() if kill else None
    if kek is not None:
        settings = settings.model_copy(update={"kek": SecretStr(kek)})
    acked: dict[str, dict[int, str]] = {}
    deleted: list[object] = []
    stop = asyncio.Event()
    sealing = asyncio.Event()
    with running_workers(
        settings,
        tmp_path_factory,
        static_membership=kill,
        loglevel="warning",
        env={} if kek is None else {"KJ_KEK": kek},
    ) as workers:
        await wait_settled(workers)
        async with client_session(settings, connector=workers[0].http_connector()) as session:
            api = Api(session, [worker.url for worker in workers])

            async def verified(journal_id: str) -> None:
                n = 1  # after the history below
                while not stop.is_set() or n < 4:
                    n += 1
                    text = f"{journal_id}:{n}"
                    await api.append(journal_id, text, n, expected=n - 1)
                    acknowledge(acked, journal_id, n, text)

            async def at_end(journal_id: str) -> None:
                k = 0
                while not stop.is_set() or k < 4:
                    k += 1
                    text = f"{journal_id}:e{k}"
                    acknowledge(acked, journal_id, await api.append(journal_id, text), text)

            async def kafka_acked(journal_id: str) -> None:
                n = 1
                while not stop.is_set() or n < 4:
                    n += 1
                    text = f"{journal_id}:{n}"
                    # the journal's only writer: a retry of the same seqNrs is a duplicate at most
                    await api.append(journal_id, text, n, kafka=True)
                    acknowledge(acked, journal_id, n, text)

            async def reader() -> int:
                reads = 0
                while not stop.is_set():
                    for journal_id in [*VERIFIED, *AT_END]:
                        before = dict(acked.get(journal_id, {}))
                        texts = await api.texts(journal_id)
                        # read-your-writes: every append acknowledged before the read started
                        assert before.items() <= texts.items(), journal_id
                        reads += 1
                return reads

            async def killer() -> None:
                """Kill -9 a worker mid-move and restart it with its identity."""
                await sealing.wait()
                workers[1].kill9()
                workers[1].start()
                await workers[1].wait_ready()

            async def deleter() -> None:
                for n in range(1, 4):
                    await api.append("d0", f"d0:{n}", n)
                await sealing.wait()  # once the grow produced its first Seal
                answer = orjson.loads(await api.call("DELETE", journal_path("d0", "/events?to=2")))
                deleted.append(answer["deleteTo"])

            for journal_id in [*VERIFIED, *KAFKA]:  # history in the old topic
                text = f"{journal_id}:1"
                await api.append(journal_id, text, 1)
                acknowledge(acked, journal_id, 1, text)
            print(f"before the grow: slowest call {api.slowest_s:.2f} s")
            api.slowest_s = 0.0
            tasks = [asyncio.create_task(verified(j)) for j in VERIFIED]
            tasks += [asyncio.create_task(at_end(j)) for j in AT_END]
            tasks += [asyncio.create_task(kafka_acked(j)) for j in KAFKA]
            tasks.append(asyncio.create_task(deleter()))
            if kill:
                tasks.append(asyncio.create_task(killer()))
            readers = [asyncio.create_task(reader()) for _ in range(2)]
            group = GroupStream(session, [worker.url for worker in workers], unique("grows"))
            streaming = asyncio.create_task(group.run())
            try:

                def say(line: str) -> None:
                    if "sealed at offset" in line:
                        sealing.set()

                grows = []
                for partitions in (6, 12):  # then the grown topic grows again
                    grow = None
                    for _ in range(5):  # the servers slow: run it again, it resumes
                        try:
                            grow = await grow_topic(settings, store, partitions, yes=True, say=say)
                            break
                        except Unavailable:
                            continue
                    assert grow is not None and grow.phase is Phase.DONE
                    assert grow.partitions == partitions
                    grows.append(grow)
                print(
                    f"during the grow: {api.unavailable} 503s, {api.broken} calls met a killed "
                    f"worker, slowest call {api.slowest_s:.2f} s"
                )
                # each verified journal appended to after the grows, however slow the host:
                # moved into the last grown topic, with a base (checked below)
                sent = {j: len(acked.get(j, {})) for j in VERIFIED}

                async def appended_after() -> bool:
                    assert not any(t.done() for t in tasks[: len(VERIFIED)]), tasks  # writers
                    return all(len(acked.get(j, {})) > sent[j] for j in VERIFIED)

                await eventually(appended_after, "an append to each journal after the grows")
                stop.set()
                await asyncio.gather(*tasks)
                assert min(await asyncio.gather(*readers)) > 0
            finally:
                stop.set()
                for task in [*tasks, *readers]:
                    task.cancel()
                await asyncio.gather(*tasks, *readers, return_exceptions=True)
            final = {j: await api.texts(j) for j in [*VERIFIED, *AT_END, *KAFKA]}
            d0 = await api.texts("d0")
            every = {(j, n) for j, texts in acked.items() for n in texts}

            async def delivered() -> bool:
                assert not streaming.done(), streaming
                missing = every - group.got
                assert not missing, f"not delivered to the group yet: {sorted(missing)[:10]}"
                return True

            try:  # across both grows, through the workers (a worker killed -9 too)
                await eventually(delivered, "the group delivered every acknowledged append")
            finally:
                streaming.cancel()
                await asyncio.gather(streaming, return_exceptions=True)
        for journal_id, texts in final.items():
            assert texts == acked[journal_id], journal_id  # each once, none lost
        assert deleted == [2] and d0 == {3: "d0:3"}
        # the old topic's replication stops at each cut and passes it; the owner of each old
        # partition replicates its successors in both grown topics
        await wait_replicated(settings, store)
        for grow in grows:
            grown = {"topic": grow.new_topic, "partitions": grow.partitions}
            await wait_replicated(settings.model_copy(update=grown), store)
    for journal_id in VERIFIED:  # written before and during the grows: moved, with a base
        rows = [await store.meta(JournalKey(g.new_topic, journal_id)) for g in grows]
        newest = [row for row in rows if row is not None][-1]
        assert newest.base > 0, (journal_id, rows)
    if kek is not None:  # one data key per journal, under the first topic, none in the others
        keys = CassandraKeyStore(lambda: keyspace_access_of(store))
        for journal_id in final:
            row = await keys.get(JournalKey(settings.topic, journal_id))
            assert row is not None and row.state is KeyState.ACTIVE, journal_id
            for grow in grows:
                assert await keys.get(JournalKey(grow.new_topic, journal_id)) is None
    # the workers stopped and every record of the three topics gone (retention): a fresh
    # direct client reads each journal from the store alone
    for topic, count in [(settings.topic, 3), *((g.new_topic, g.partitions) for g in grows)]:
        await expire_all(settings, topic, count)
    async with await Journals.connect(settings, store=store) as later:
        for journal_id, texts in final.items():
            read: dict[int, str] = {}
            async for record in later.journal(journal_id).read():
                assert isinstance(record.event.payload, TextPayload)
                read[record.seq_nr] = record.event.payload.value
            assert read == texts, journal_id
    # the moved journals' later appends went to the last grown topic
    assert sum((await end_offsets(settings.kafka_access(), grows[-1].new_topic, 12)).values()) > 0


async def held_partitions(workers: Sequence[WorkerProcess], topic: str) -> list[float]:
    """The action partitions each worker's Faust app holds of `topic` (its /metrics): which
    topic a worker runs on, as the assignor told it."""
    active = f'kafka_journal_faust_assigned_partitions{{kind="active",topic="{topic}"}}'
    return [await metric(worker, active) for worker in workers]


async def test_workers_move_to_the_grown_topic_by_a_rolling_restart(
    stack: Stack, keyspace: str, store: CassandraStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two workers on OLD (2 partitions) serve appends while the topic grows to 4, then are
    restarted one by one, appends going on: both run on NEW (its 4 partitions between them,
    none of OLD's), every acknowledged append reads back exact through either, journals moved,
    created in NEW before the switch and after it replicate into the store, and a journal
    whose first `expireAfter` came after the move is purged when due (NEW's expiry tables)."""
    settings = settings_for(stack, unique("journal_move"), keyspace, 2)
    acked: dict[str, dict[int, str]] = {}
    stop = asyncio.Event()
    with running_workers(settings, tmp_path_factory, loglevel="warning") as workers:
        await wait_settled(workers)
        async with client_session(settings, connector=workers[0].http_connector()) as session:
            api = Api(session, [worker.url for worker in workers])

            async def verified(journal_id: str) -> None:
                n = 0
                while not stop.is_set() or n < 3:
                    n += 1
                    text = f"{journal_id}:{n}"
                    await api.append(journal_id, text, n, expected=n - 1)
                    acknowledge(acked, journal_id, n, text)

            await api.append("moved-expiring", "mx:1", 1)  # in OLD, with no deadline
            writers = [asyncio.create_task(verified(j)) for j in VERIFIED]
            try:
                await eventually(
                    lambda: _all_appended(acked, VERIFIED, 2), "history in the old topic"
                )
                grow = await grow_topic(settings, store, 4, yes=True)
                assert grow is not None and grow.phase is Phase.DONE
                new = grow.new_topic
                # created in NEW while both workers still run on OLD
                acknowledge(acked, "before", await api.append("before", "before:1"), "before:1")
                for worker in workers:  # the rolling restart, the writers going on
                    await asyncio.to_thread(worker.stop)
                    worker.start()
                    await worker.wait_ready()

                async def moved() -> list[float]:
                    held = await held_partitions(workers, new)
                    assert 0 not in held and sum(held) == 4, f"held of {new}: {held}"
                    assert await held_partitions(workers, settings.topic) == [0, 0]
                    return held

                await eventually(moved, f"both workers run on {new}")
                sent = {j: len(acked.get(j, {})) for j in VERIFIED}
                await eventually(
                    lambda: _all_appended(acked, VERIFIED, sent), "appends after the switch"
                )
            finally:
                stop.set()
                await asyncio.gather(*writers)
            for n in (1, 2):  # created after the switch
                acknowledge(acked, "after", await api.append("after", f"after:{n}"), f"after:{n}")
            # their first `expireAfter` after the move (one with history in OLD, one created
            # in NEW): only NEW's expiry tables know of them
            for journal_id, seq_nr in (("moved-expiring", 2), ("expiring", 1)):
                body = {
                    "events": [{"seqNr": seq_nr, "payloadText": "x"}],
                    "expireAfter": "PT2S",
                }
                await api.call(
                    "POST",
                    journal_path(journal_id, "/events"),
                    data=orjson.dumps(body),
                    headers={"Content-Type": "application/json"},
                )
            for url in [worker.url for worker in workers]:  # exact through either worker
                one = Api(session, [url])
                for journal_id, texts in acked.items():
                    assert await one.texts(journal_id) == texts, (url, journal_id)

            async def purged() -> bool:
                assert await api.texts("moved-expiring") == {}
                assert await api.texts("expiring") == {}
                return True

            await eventually(purged, "the journal expiring after the move purged")
            await wait_replicated(settings, store)  # OLD through its cuts
            await wait_replicated(
                settings.model_copy(update={"topic": new, "partitions": 4}), store
            )
    for journal_id in VERIFIED:  # moved: NEW's row folded onto OLD's
        row = await store.meta(JournalKey(new, journal_id))
        assert row is not None and row.base > 0, (journal_id, row)
        assert row.state.seq_nr == len(acked[journal_id]), (journal_id, row)
    for journal_id in ("before", "after"):
        row = await store.meta(JournalKey(new, journal_id))
        assert row is not None and row.state.seq_nr == len(acked[journal_id]), (journal_id, row)
        assert await store.meta(JournalKey(settings.topic, journal_id)) is None


@pytest.mark.parametrize("counts", [(4,), (4, 8)], ids=["2 -> 4", "2 -> 4 -> 8"])
async def test_a_worker_on_the_grown_topic_catches_the_old_one_up_to_its_cuts(
    stack: Stack,
    keyspace: str,
    store: CassandraStore,
    tmp_path_factory: pytest.TempPathFactory,
    counts: tuple[int, ...],
) -> None:
    """No topic of the chain ever replicated (no worker ran: appends through a direct client,
    one in each topic), grown, then workers started: they run on the last topic only, yet
    replicate each predecessor up to its cuts themselves, link by link (no one else would),
    before their own topic, whose moved journals' rows then carry their bases."""
    settings = settings_for(stack, unique("journal_move_late"), keyspace, 2)
    grows = []
    async with await Journals.connect(settings, store=store) as direct:
        for n, partitions in enumerate((None, *counts), start=1):
            if partitions is not None:
                grow = await grow_topic(settings, store, partitions, yes=True)
                assert grow is not None and grow.phase is Phase.DONE
                grows.append(grow)
            for journal_id in VERIFIED:  # after a grow: moved, onto its state before
                text = TextPayload(f"{journal_id}:{n}")
                await direct.journal(journal_id).append([Event(n, payload=text)])
    last = grows[-1]
    for topic in [settings.topic, *(g.new_topic for g in grows)]:
        assert await store.pointers(topic) == {}  # nothing replicated
    with running_workers(settings, tmp_path_factory, loglevel="warning") as workers:
        for worker in workers:
            await worker.wait_ready()

        async def on_the_last() -> bool:
            assert sum(await held_partitions(workers, last.new_topic)) == float(last.partitions)
            return True

        await eventually(on_the_last, f"the workers run on {last.new_topic}")
        for grow in grows:
            assert await held_partitions(workers, grow.topic) == [0, 0]
            cuts = {p: cut + 1 for p, cut in grow.cut.items()}
            await wait_pointers(store, grow.topic, cuts, WITHIN_S)
        on = {"topic": last.new_topic, "partitions": last.partitions}
        await wait_replicated(settings.model_copy(update=on), store)
        async with client_session(settings, connector=workers[0].http_connector()) as session:
            api = Api(session, [worker.url for worker in workers])
            for journal_id in VERIFIED:
                texts = {n: f"{journal_id}:{n}" for n in range(1, len(grows) + 2)}
                assert await api.texts(journal_id) == texts, journal_id
    for journal_id in VERIFIED:  # the last topic's row: onto the state before it
        row = await store.meta(JournalKey(last.new_topic, journal_id))
        assert row is not None and row.base > 0, (journal_id, row)
        assert row.state.seq_nr == len(grows) + 1, (journal_id, row)


async def _all_appended(
    acked: dict[str, dict[int, str]], journals: Sequence[str], more_than: int | dict[str, int]
) -> bool:
    """Every journal has more acknowledged appends than `more_than` (one count or each's)."""
    counts = {j: len(acked.get(j, {})) for j in journals}
    return all(
        n > (more_than if isinstance(more_than, int) else more_than[j]) for j, n in counts.items()
    )
