"""Encrypted journals against plain ones (issue 44, docs/erasure.md), in one run: appends of
one event at c=64, and the recovery of one long replicated journal, each read or append
through the direct client of a deployment with a key-encryption key and of one without."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pydantic import SecretStr

from bench.common import Row, Section, median, spread, unique
from bench.environment import connected, settings_for
from journal import Event, Journals, JsonPayload
from journal.codec import new_kek_text
from journal.kafka import JournalProducer
from journal.replication import KafkaQuarantine, replicate_to_now
from journal.settings import Settings
from journal.store import CassandraStore

METHOD = (
    "Two deployments on the same servers, each a fresh topic (3 partitions) and keyspace: plain, "
    "and with a key-encryption key (every payload sealed with its journal's AES-256-GCM key). "
    "Appends: {concurrency} journals, each given its key by a first append before timing, then "
    "{appends:,} appends of one ~100-byte JSON event at c={concurrency} (one task per journal, "
    "its appends one after the other, `Ack.VERIFIED`); appends/s. Recovery: one journal of "
    "{events:,} events (appends of 100), replicated to the store before timing, read from "
    "seqNr 1 to its end with `journal.read()`, every event consumed; events/s. The two "
    "deployments alternate, {reps} repetitions each after a warm-up; medians (spread min..max)."
)
GOAL = 0.9  # issue 44: encrypted >= 0.9x plain
_PAD = "x" * 62


@dataclass(frozen=True, slots=True)
class EncryptionSizes:
    appends: int = 3200
    concurrency: int = 64
    recovery_events: int = 20_000
    repetitions: int = 3


def _event(seq_nr: int) -> Event:
    return Event(seq_nr, payload=JsonPayload.of({"n": seq_nr, "kind": "bench", "pad": _PAD}))


async def _replicate(settings: Settings, store: CassandraStore) -> None:
    producer = JournalProducer(settings.kafka_access())
    await producer.start()
    try:
        kafka = settings.kafka_access()
        await replicate_to_now(kafka, store, settings.topic, KafkaQuarantine(producer))
    finally:
        await producer.stop()


class _Deployment:
    def __init__(self, journals: Journals, concurrency: int) -> None:
        self.journals = journals
        self.ids = [unique("append") for _ in range(concurrency)]
        self.next = dict.fromkeys(self.ids, 1)
        self.recovery = unique("recovery")

    async def append_one(self, journal_id: str) -> None:
        seq_nr = self.next[journal_id]
        await self.journals.journal(journal_id).append([_event(seq_nr)])
        self.next[journal_id] = seq_nr + 1

    async def appends(self, count: int) -> float:
        """`count` appends over the journals at once; appends/s."""
        per = count // len(self.ids)

        async def one_journal(journal_id: str) -> None:
            for _ in range(per):
                await self.append_one(journal_id)

        started = time.perf_counter()
        await asyncio.gather(*(one_journal(i) for i in self.ids))
        return per * len(self.ids) / (time.perf_counter() - started)

    async def write_recovery(self, events: int) -> None:
        journal = self.journals.journal(self.recovery)
        for first in range(1, events + 1, 100):
            last = min(first + 99, events)
            await journal.append([_event(n) for n in range(first, last + 1)])

    async def read_recovery(self, events: int) -> float:
        started = time.perf_counter()
        count = 0
        async for _ in self.journals.journal(self.recovery).read():
            count += 1
        if count != events:
            raise RuntimeError(f"the recovery read {count} events of {events}")
        return count / (time.perf_counter() - started)


async def bench_encryption(base: Settings, sizes: EncryptionSizes) -> Section:
    section = Section(
        "Encrypted journals",
        METHOD.format(
            concurrency=sizes.concurrency,
            appends=sizes.appends,
            events=sizes.recovery_events,
            reps=sizes.repetitions,
        ),
    )
    plain_settings = settings_for(base, "plain")
    sealed_settings = settings_for(base, "sealed").model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    async with (
        connected(plain_settings) as (plain_journals, plain_store),
        connected(sealed_settings) as (sealed_journals, sealed_store),
    ):
        plain = _Deployment(plain_journals, sizes.concurrency)
        sealed = _Deployment(sealed_journals, sizes.concurrency)
        for deployment in (plain, sealed):  # warm-up: every journal has its key and seqNr 1
            await asyncio.gather(*(deployment.append_one(i) for i in deployment.ids))
            await deployment.write_recovery(sizes.recovery_events)
        await _replicate(plain_settings, plain_store)
        await _replicate(sealed_settings, sealed_store)

        rates: dict[str, list[float]] = {"plain": [], "sealed": []}
        reads: dict[str, list[float]] = {"plain": [], "sealed": []}
        await plain.read_recovery(sizes.recovery_events)  # warm-up reads
        await sealed.read_recovery(sizes.recovery_events)
        for repetition in range(sizes.repetitions):
            order = [("plain", plain), ("sealed", sealed)]
            if repetition % 2:
                order.reverse()
            for name, deployment in order:
                rates[name].append(await deployment.appends(sizes.appends))
                reads[name].append(await deployment.read_recovery(sizes.recovery_events))

    for what, samples, unit in (
        ("appends (1 event, c=64)", rates, "appends/s"),
        (f"recovery of {sizes.recovery_events:,} events", reads, "events/s"),
    ):
        baseline, value = median(samples["plain"]), median(samples["sealed"])
        section.rows.append(Row(f"{what}, plain", baseline, unit, note=spread(samples["plain"])))
        section.rows.append(
            Row(
                f"{what}, encrypted",
                value,
                unit,
                baseline=baseline,
                goal=f">= {GOAL}x plain",
                met=value >= GOAL * baseline,
                note=spread(samples["sealed"]),
            )
        )
    return section
