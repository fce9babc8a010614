"""Appends on a three-node Kafka cluster against the same on the one-node dev stack, and how
long a partition takes no append while its leader broker is dead."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from bench.common import Row, Section, Timed, median, percentile, unique
from bench.workload import closed_loop, events
from devtools.cluster import three_nodes
from journal import Ack, Journals
from journal.errors import Unavailable
from journal.kafka import partition_of
from journal.settings import Settings
from stack import KafkaCluster

_GIVE_UP_S = 120.0  # an outage longer than this is reported as infinite

METHOD = (
    "The direct client appends 1 event per append, c={concurrency}, {appends} appends per "
    "repetition, {reps} repetitions after one warm-up, verified (the default) and "
    "Kafka-acknowledged, alternating between the one-node dev stack and a three-node KRaft "
    "cluster started for the scenario on the same machine (each node broker and controller, "
    "256 MiB heap, topics with 3 replicas and min.insync.replicas=2: acks=all waits for a "
    "second replica); the same Cassandra serves both. Unavailability: one writer appends to a "
    "journal of partition 0 in a loop; partition 0's leader is killed -9 {kills} times (then "
    "restarted, and the cluster left to catch up); the time from the kill to the next "
    "acknowledged append of that partition."
)


async def bench_cluster(
    base: Settings,
    workdir: Path,
    concurrency: int = 64,
    appends: int = 3200,
    repetitions: int = 3,
    kills: int = 2,
) -> Section:
    section = Section(
        "Append on a three-node cluster",
        METHOD.format(concurrency=concurrency, appends=appends, reps=repetitions, kills=kills),
    )
    with three_nodes(workdir) as cluster:
        one = base.replace(topic=unique("bench_one_node"), keyspace=unique("bench_one_node"))
        three = base.replace(
            topic=unique("bench_three_nodes"),
            keyspace=unique("bench_three_nodes"),
            kafka_bootstrap=cluster.settings.kafka_bootstrap,
        )
        clients = {"1 node": await Journals.connect(one), "3 nodes": await Journals.connect(three)}
        try:
            for ack in (Ack.VERIFIED, Ack.KAFKA):
                runs: dict[str, list[Timed]] = {name: [] for name in clients}
                for repetition in range(repetitions + 1):
                    for name, journals in clients.items():
                        timed = await _appends(journals, ack, concurrency, appends)
                        if repetition > 0:  # the first is the warm-up
                            runs[name].append(timed)
                _rows(section, ack, concurrency, runs)
            outages = await _outages(clients["3 nodes"], cluster, kills)
        finally:
            for journals in clients.values():
                await journals.close()
    for q in (50, 100):
        value = percentile(outages, q)
        label = "max" if q == 100 else f"p{q}"
        goal, met = ("<= 10 s", value <= 10.0) if q == 100 else ("", None)
        section.add(
            Row(
                f"no append to a partition after its leader's kill: {label}",
                value,
                "s",
                None,
                goal,
                met,
                note=f"{len(outages)} kills",
            )
        )
    return section


async def _appends(journals: Journals, ack: Ack, concurrency: int, total: int) -> Timed:
    prefix = unique("c")
    rounds = max(1, total // concurrency)
    batches = [events(r + 1, 1) for r in range(rounds)]

    async def append(lane: int, round_: int) -> None:
        await journals.journal(f"{prefix}-{lane}").append(batches[round_], ack=ack)

    return await closed_loop(append, concurrency, total)


def _rows(section: Section, ack: Ack, concurrency: int, runs: dict[str, list[Timed]]) -> None:
    label = f"{ack.value}, 1 ev/append, c={concurrency}"
    rate = {name: median([run.per_second for run in timed]) for name, timed in runs.items()}
    p99 = {
        name: percentile([ms for run in timed for ms in run.latencies_ms], 99)
        for name, timed in runs.items()
    }
    section.add(Row(f"1 node, {label}: throughput", rate["1 node"], "appends/s"))
    section.add(Row(f"3 nodes, {label}: throughput", rate["3 nodes"], "appends/s", rate["1 node"]))
    section.add(Row(f"1 node, {label}: p99", p99["1 node"], "ms"))
    section.add(Row(f"3 nodes, {label}: p99", p99["3 nodes"], "ms", p99["1 node"]))


async def _outages(journals: Journals, cluster: KafkaCluster, kills: int) -> list[float]:
    """Seconds from each kill of partition 0's leader to the next acknowledged append there."""
    prefix, partitions = unique("outage"), journals.writer.partitions
    ids = (f"{prefix}-{n}" for n in range(10_000))
    journal = journals.journal(next(i for i in ids if partition_of(i, partitions) == 0))
    acknowledged: list[float] = []
    stop = asyncio.Event()

    async def writer() -> None:
        seq_nr = 0
        while not stop.is_set():
            try:
                await journal.append(events(seq_nr + 1, 1), ack=Ack.KAFKA)
            except Unavailable:
                await asyncio.sleep(0.1)  # a 503 to a client: it tries again
                continue
            seq_nr += 1
            acknowledged.append(time.monotonic())

    outages = []
    task = asyncio.create_task(writer())
    try:
        for _ in range(kills):
            await asyncio.sleep(2)  # appends flowing before the kill
            leader = await _leader(cluster.settings.kafka_bootstrap, journals.topic)
            (node,) = [n for n in cluster.nodes if n.node.node_id == leader]
            killed = time.monotonic()
            node.kill9()
            while not any(at > killed for at in acknowledged):
                if time.monotonic() - killed > _GIVE_UP_S:
                    break
                await asyncio.sleep(0.05)  # polls the writer's acknowledgements
            after = [at for at in acknowledged if at > killed]
            outages.append(min(after) - killed if after else float("inf"))
            await asyncio.to_thread(cluster.start)
    finally:
        stop.set()
        await task
    return outages


async def _leader(bootstrap: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        (zero,) = [p for p in described["partitions"] if p["partition"] == 0]
        leader: int = zero["leader"]
        return leader
    finally:
        await admin.close()
