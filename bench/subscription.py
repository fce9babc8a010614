"""Subscriptions: events delivered per second to one subscriber over every partition, against
a raw aiokafka consumer reading the same records, and append-to-arrival latency live."""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import aiohttp
import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from app.garbage import worker_garbage_collector
from app.http_tokens import client_headers
from bench.common import Row, Section, median, percentile, spread, unique
from bench.environment import connected, settings_for, worker
from bench.group_member import member_processes
from bench.workload import events
from devtools.workers import WorkerProcess
from journal import Ack, Heartbeat, Journals, SubscribedEvent, SubscriptionPosition
from journal.codec import events_of, parse_checked
from journal.kafka import end_offsets, raw_record
from journal.replication import AlreadyQuarantined, replicate_to_now, wait_replicated
from journal.settings import Settings
from journal.subscriptions import reset_group

_HEARTBEAT = b'{"heartbeat"'
# the subscription's goal: at least this share of a raw consumer that decodes as it does
SUBSCRIPTION_GOAL = 0.25

METHOD = (
    "A topic of {partitions} partitions holds {events:,} events (~300 bytes each) in Appends "
    "of {batch} events over {journals} journals; the first half is replicated (delivered by "
    "the store's table of accepted Appends), the second half is not (delivered by folding "
    "onto the journals' rows). One subscriber (`Journals.subscribe`, live=false) reads it "
    "all, decoding every event; its payloads stay the bytes they came as. Three baselines, raw "
    "AIOKafkaConsumers (no group, the same fetch settings) reading the same records, as "
    "events/s (records times {batch}): one that decodes each record as the subscription does "
    "(the product's codec: `parse_checked` and `events_of`, payloads kept as bytes), the one "
    "the goal row is held to; one that decodes nothing; one that also orjson-decodes every "
    "payload into JSON objects (work the product never does). The subscription is measured "
    "twice: as the interpreter starts, and with "
    "the worker's garbage collector settings (app/garbage.py: the start-up heap frozen, fewer "
    "collections). {reps} repetitions each, "
    "alternating; medians. Then a worker serves the "
    "topic and, once it has replicated it all, GET /events (live=false, lines counted) "
    "through it alternates with the direct client. Latency: a live "
    "subscriber at the end of the topic while {live} one-event appends are made one after "
    "the other, {gap_ms} ms apart; for each, the time from the append's acknowledgement to "
    "the subscriber receiving it. Subscription groups of 1, 2 and 3 members: each member runs "
    "in a process of its own (`python -m bench.group_member`: its own client, joining with "
    "`Journals.subscribe_group`, acknowledging every batch, reporting each batch's records and "
    "receive time to this process); from the group stable (each member assigned partitions, "
    "all partitions assigned) to the first delivery of its last event, events/s in all "
    "(distinct events) and per member (repeats included), against the plain subscription "
    "above (this process). Kafka's fetcher may prefetch while the members wait for the start "
    "(a fetch, up to 1 MiB, of each partition: undecoded bytes, a head start at small sizes). "
    "Group lag: a fresh group of {lag_members} member processes, its checkpoints "
    "set at the topic's end, consumes live while this process offers {offered_rate} appends/s "
    "of {batch} events for {offered_s:g} s over {journals} fresh journals (each journal's "
    "appends in order, so a late one delays its next); for each event, the time from its "
    "append's acknowledgement to its first delivery to a member (CLOCK_MONOTONIC, one clock "
    "for both processes)."
)


@dataclass(frozen=True, slots=True)
class SubscriptionSizes:
    events: int
    batch: int = 10
    journals: int = 100
    repetitions: int = 3
    live: int = 200
    gap_ms: int = 20
    lag_members: int = 3  # the live group's member processes
    offered_rate: int = 200  # appends/s offered to the live group
    offered_s: float = 10.0


async def _write(journals: Journals, sizes: SubscriptionSizes, ids: list[str]) -> None:
    """Half of the events, over `ids`."""
    appends = sizes.events // 2 // sizes.batch
    per_journal = max(1, appends // len(ids))

    async def writer(journal_id: str) -> None:
        journal = journals.journal(journal_id)
        for i in range(per_journal):
            await journal.append(events(i * sizes.batch + 1, sizes.batch), ack=Ack.KAFKA)

    for start in range(0, len(ids), 20):  # 20 writers at a time
        await asyncio.gather(*(writer(j) for j in ids[start : start + 20]))


# What a raw consumer decodes (`_raw`): nothing; each record as the subscription does (the
# product's codec, payloads kept as bytes); or every payload into JSON objects with orjson.
Decoding = Literal["nothing", "codec", "orjson"]


async def _raw(
    settings: Settings, batch_size: int, decode: Decoding = "nothing"
) -> tuple[float, int]:
    """Seconds a raw consumer takes to read every record of the topic (decoding each as
    `decode` says); the records."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=1024 * 1024,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic, p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        started = time.perf_counter()
        await consumer.seek_to_beginning(*tps)
        records = decoded = 0
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            batches = await consumer.getmany(timeout_ms=1000, max_records=500)
            records += sum(len(b) for b in batches.values())
            if decode == "nothing":
                continue
            for batch in batches.values():
                for message in batch:
                    if decode == "codec":
                        action = parse_checked(raw_record(message))
                        decoded += 0 if action is None else len(events_of(action))
                    else:
                        decoded += len(orjson.loads(message.value or b"{}").get("events", ()))
        seconds = time.perf_counter() - started
        assert decode == "nothing" or decoded == records * batch_size, (decoded, records)
        return seconds, records
    finally:
        await consumer.stop()


async def _subscribed(journals: Journals) -> tuple[float, int, SubscriptionPosition]:
    """Seconds one subscriber takes to receive every event; the events; its end position."""
    started = time.perf_counter()
    delivered = 0
    position = SubscriptionPosition()
    async for item in journals.subscribe():
        if isinstance(item, SubscribedEvent):
            delivered += 1
        position = item.position
    return time.perf_counter() - started, delivered, position


@dataclass(frozen=True, slots=True)
class Grouped:
    """A group's run from the start it was given: seconds until every event was delivered,
    the distinct events, and what each member delivered (repeats included)."""

    seconds: float
    events: int
    per_member: list[int]


async def _grouped(settings: Settings, members: int, expected: int) -> Grouped:
    """`members` member processes of a fresh group, once it is stable, delivering the
    topic's `expected` events between them (each acknowledging every batch)."""
    with tempfile.TemporaryDirectory(prefix="kj-bench-group-") as logs:
        async with member_processes(settings, unique("bench"), members, Path(logs)) as group:
            await group.stable(settings.partitions)
            started = await group.go()
            await group.until(lambda: group.distinct >= expected, timeout_s=600)
            finished = max(received for received, _ in group.first.values())
            await group.stop()
    return Grouped(finished - started, group.distinct, group.delivered)


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A live group's delivery lag, per event (ms), at an offered load, and the appends/s
    this process achieved offering it."""

    lags_ms: list[float]
    achieved: float


async def _group_lag(settings: Settings, journals: Journals, sizes: SubscriptionSizes) -> GroupLag:
    """A fresh group of `sizes.lag_members` processes, its checkpoints at the topic's end,
    consuming live while appends of `sizes.batch` events are offered at `sizes.offered_rate`
    a second for `sizes.offered_s` over fresh journals: for each event, the time from its
    append's acknowledgement to its first delivery."""
    name = unique("bench")
    await reset_group(settings.kafka_access(), settings.topic, name, int(time.time() * 1000))
    total = int(sizes.offered_rate * sizes.offered_s)
    ids = [unique("lag") for _ in range(sizes.journals)]
    acked: dict[tuple[int, int], float] = {}

    async def writer(index: int, started: float) -> None:
        """The appends of journal `index`, each at its slot or, when late, right after the
        journal's previous one (in order, as one journal's writer must)."""
        journal = journals.journal(ids[index])
        for n, slot in enumerate(range(index, total, len(ids))):
            await asyncio.sleep(max(0.0, started + slot / sizes.offered_rate - time.monotonic()))
            appended = await journal.append(events(n * sizes.batch + 1, sizes.batch), ack=Ack.KAFKA)
            acked[(appended.partition, appended.offset)] = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="kj-bench-group-") as logs:
        async with member_processes(settings, name, sizes.lag_members, Path(logs)) as group:
            await group.stable(settings.partitions)
            started = await group.go()
            await asyncio.gather(*(writer(i, started) for i in range(len(ids))))
            offered_s = max(acked.values()) - started
            await group.until(lambda: acked.keys() <= group.first.keys(), timeout_s=120)
            await group.stop()
    lags = []
    for where, at in acked.items():
        received, delivered = group.first[where]
        lags += [(received - at) * 1000] * delivered
    return GroupLag(lags, total / offered_s)


async def _latencies(
    journals: Journals, after: SubscriptionPosition, sizes: SubscriptionSizes
) -> list[float]:
    acked: dict[int, float] = {}
    arrived: dict[int, float] = {}
    done = asyncio.Event()

    async def subscriber() -> None:
        async for item in journals.subscribe(after, live=True, heartbeat_s=1.0):
            if isinstance(item, SubscribedEvent) and item.key.id == "live":
                arrived[item.record.seq_nr] = time.perf_counter()
                if len(arrived) == sizes.live:
                    done.set()
                    return
            elif isinstance(item, Heartbeat) and not acked:
                ready.set()

    ready = asyncio.Event()
    task = asyncio.create_task(subscriber())
    try:
        await asyncio.wait_for(ready.wait(), 30)  # the subscriber is at the end
        journal = journals.journal("live")
        for n in range(1, sizes.live + 1):
            await journal.append(events(n, 1), ack=Ack.KAFKA)
            acked[n] = time.perf_counter()
            await asyncio.sleep(sizes.gap_ms / 1000)
        await asyncio.wait_for(done.wait(), 60)
    finally:
        task.cancel()
    return [(arrived[n] - acked[n]) * 1000 for n in sorted(arrived)]


async def _over_http(worker: WorkerProcess, http: aiohttp.ClientSession) -> tuple[float, int]:
    """Seconds GET /events (from the start, live=false) takes through `worker`; its events."""
    started = time.perf_counter()
    lines = heartbeats = 0
    tail = b""  # a heartbeat's opening may straddle two chunks
    async with http.get(worker.url / "events") as response:
        assert response.status == 200, await response.text()
        async for chunk in response.content.iter_chunked(1 << 16):
            lines += chunk.count(b"\n")
            heartbeats += (tail + chunk).count(_HEARTBEAT) - tail.count(_HEARTBEAT)
            tail = chunk[-len(_HEARTBEAT) :]
    return time.perf_counter() - started, lines - heartbeats


async def _through_worker(
    settings: Settings, journals: Journals, sizes: SubscriptionSizes
) -> tuple[list[float], list[float]]:
    """Events/s of GET /events through a worker, and of the direct client, alternating, once
    the worker has replicated the topic (so that nothing else runs meanwhile)."""
    http_rates: list[float] = []
    direct_rates: list[float] = []
    with tempfile.TemporaryDirectory() as workdir:
        process = worker(settings, Path(workdir) / "worker")
        process.start()
        try:
            await process.wait_ready()
            ends = await end_offsets(settings.kafka_access(), settings.topic, settings.partitions)
            await wait_replicated(journals.store, settings.topic, ends, timeout_s=600)
            timeout = aiohttp.ClientTimeout(total=600)
            headers = client_headers(settings)
            async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:
                for _ in range(sizes.repetitions):
                    seconds, over_http = await _over_http(process, http)
                    http_rates.append(over_http / seconds)
                    seconds, direct, _ = await _subscribed(journals)
                    direct_rates.append(direct / seconds)
                    assert over_http == direct, (over_http, direct)
        finally:
            process.stop()
    return http_rates, direct_rates


def subscription_rows(
    section: Section, rates: list[float], delivered: int, baselines: dict[Decoding, list[float]]
) -> None:
    """The subscription's rate against the three raw consumers (`Decoding`): the goal is held
    to the one that decodes as the subscription does."""
    rate, raw_rate = median(rates), median(baselines["nothing"])
    codec_rate, orjson_rate = median(baselines["codec"]), median(baselines["orjson"])
    section.throughputs["raw consumer"] = raw_rate
    section.throughputs["raw consumer, decoding as the subscription"] = codec_rate
    section.throughputs["subscription"] = rate
    section.add(
        Row(
            "subscription: events delivered/s, one subscriber, all partitions "
            "(baseline: a raw consumer decoding as it does)",
            rate,
            "events/s",
            baseline=codec_rate,
            goal=f">= {SUBSCRIPTION_GOAL}x raw consumer decoding as the subscription does",
            met=rate >= SUBSCRIPTION_GOAL * codec_rate,
            spread=spread(rates),
            note=f"{delivered:,} events; baseline: a raw consumer decoding each record with "
            f"the product's codec, payloads kept as bytes ({spread(baselines['codec'])} "
            f"events/s); the other baselines in the notes below",
        )
    )
    section.add(
        Row(
            "note: the same against a raw consumer that decodes nothing",
            rate,
            "events/s",
            baseline=raw_rate,
            spread=spread(baselines["nothing"]),
            note="only Kafka's fetches: the ratio is all the subscription does with records",
        )
    )
    section.add(
        Row(
            "note: the same against a raw consumer that orjson-decodes every payload",
            rate,
            "events/s",
            baseline=orjson_rate,
            spread=spread(baselines["orjson"]),
            note="orjson.loads of each value into its events' JSON objects: work the "
            "product never does (it keeps payloads as bytes), so not a goal's baseline",
        )
    )


async def bench_subscription(base: Settings, sizes: SubscriptionSizes) -> Section:
    settings = settings_for(base, "subscription", partitions=8)
    section = Section(
        "Subscription",
        METHOD.format(
            partitions=settings.partitions,
            events=sizes.events,
            batch=sizes.batch,
            journals=sizes.journals,
            reps=sizes.repetitions,
            live=sizes.live,
            gap_ms=sizes.gap_ms,
            lag_members=sizes.lag_members,
            offered_rate=sizes.offered_rate,
            offered_s=sizes.offered_s,
        ),
    )
    async with connected(settings) as (journals, store):
        ids = [f"j{i}" for i in range(sizes.journals)]
        await _write(journals, sizes, ids[: len(ids) // 2] if len(ids) > 1 else ids)
        await replicate_to_now(settings.kafka_access(), store, settings.topic, AlreadyQuarantined())
        await _write(journals, sizes, ids[len(ids) // 2 :] if len(ids) > 1 else ids)
        baselines: dict[Decoding, list[float]] = {"nothing": [], "codec": [], "orjson": []}
        rates: list[float] = []
        frozen_rates: list[float] = []
        delivered, position = 0, SubscriptionPosition()
        for _ in range(sizes.repetitions):
            for decode, decode_rates in baselines.items():
                seconds, records = await _raw(settings, sizes.batch, decode)
                decode_rates.append(records * sizes.batch / seconds)
            seconds, delivered, position = await _subscribed(journals)
            rates.append(delivered / seconds)
            with worker_garbage_collector():
                seconds, frozen_delivered, _ = await _subscribed(journals)
            frozen_rates.append(frozen_delivered / seconds)
        rate, raw_rate = median(rates), median(baselines["nothing"])
        subscription_rows(section, rates, delivered, baselines)
        section.add(
            Row(
                "note: the subscription with a worker's garbage collector settings",
                median(frozen_rates),
                "events/s",
                baseline=raw_rate,
                spread=spread(frozen_rates),
                note="the start-up heap frozen and fewer collections (app/garbage.py): a "
                "subscription allocates a few objects per event and sets many collections off",
            )
        )
        expected = delivered
        for members in (1, 2, 3):
            grouped = await _grouped(settings, members, expected)
            per_member = [count / grouped.seconds for count in grouped.per_member]
            repeats = sum(grouped.per_member) - grouped.events
            section.add(
                Row(
                    f"subscription group of {members}: events/s delivered, all members",
                    grouped.events / grouped.seconds,
                    "events/s",
                    baseline=rate,
                    note=f"per member: {', '.join(f'{r:,.0f}' for r in per_member)} events/s; "
                    f"{repeats} delivered twice (a rebalance's at least once); each member a "
                    "process of its own, from the group stable to the last event delivered",
                )
            )
            if members > 1:
                section.add(
                    Row(
                        f"subscription group of {members}: events/s delivered per member, mean",
                        sum(per_member) / members,
                        "events/s",
                        baseline=rate,
                        spread=spread(per_member),
                    )
                )
        latencies = await _latencies(journals, position, sizes)
        section.samples["append -> live subscriber"] = latencies
        section.add(Row("append acknowledged -> live subscriber: p50", median(latencies), "ms"))
        section.add(
            Row("append acknowledged -> live subscriber: p99", percentile(latencies, 99), "ms")
        )
        http_rates, direct_rates = await _through_worker(settings, journals, sizes)
        section.add(
            Row(
                "subscription over HTTP: events/s, GET /events through one worker",
                median(http_rates),
                "events/s",
                baseline=raw_rate,
                spread=spread(http_rates),
                note=f"the topic replicated by then; the direct client on it: "
                f"{spread(direct_rates)} events/s",
            )
        )
        live = await _group_lag(settings, journals, sizes)
        members = sizes.lag_members
        section.samples[f"append -> group of {members}"] = live.lags_ms
        section.add(
            Row(
                f"subscription group of {members}, live: offered appends/s achieved",
                live.achieved,
                "appends/s",
                baseline=sizes.offered_rate,
                note=f"{sizes.batch} events an append, offered for {sizes.offered_s:g} s",
            )
        )
        for q in (50, 99):
            section.add(
                Row(
                    f"subscription group of {members}, live: append acknowledged -> "
                    f"delivered to a member, p{q}",
                    percentile(live.lags_ms, q),
                    "ms",
                    note=f"{len(live.lags_ms):,} events; the first delivery of each",
                )
            )
    return section
