"""Encrypted journals against plain ones (issue 44, docs/erasure.md), in one run: appends of
one event at c=64, and the recovery of one long replicated journal, each read or append
through the direct client of a deployment with a key-encryption key and of one without."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import SecretStr

from bench.common import Row, Section, median, spread, unique
from bench.environment import connected, replicate_here, settings_for
from journal import Event, EventRecord, Journals, JsonPayload
from journal.codec import Opener, new_data_key, new_kek_text, seal
from journal.settings import Settings

METHOD = (
    "Two deployments on the same servers, each a fresh topic (3 partitions) and keyspace: plain, "
    "and with a key-encryption key (every payload sealed with its journal's AES-256-GCM key). "
    "Appends: {concurrency} journals, each given its key by a first append before timing, then "
    "{appends:,} appends of one ~100-byte JSON event at c={concurrency} (one task per journal, "
    "its appends one after the other, `Ack.VERIFIED`); appends/s. Recovery: one journal of "
    "{events:,} events (appends of 100), replicated to the store before timing, read from "
    "seqNr 1 to its end with `journal.read()`, every event consumed; events/s. The two "
    "deployments alternate, {reps} repetitions each after a warm-up; medians (spread min..max). "
    "Client CPU: this process's CPU time (all its threads: the driver's decoding, the reading "
    "flow, the opening) over each recovery read, us an event: what a shared host's load blurs "
    "least. Opening: {page:,} sealed events of the recovery's payload opened a page at a time "
    "(`Opener.records`, as a read does) against `AESGCM.decrypt` alone with its inputs ready, "
    "in memory, best of {tries}; ns an event."
)
GOAL = 0.9  # issue 44: encrypted >= 0.9x plain
_PAD = "x" * 62
_PAGE = 1000  # events opened at a time in the opening's measure: a store page's worth
_TRIES = 5
_WHEN = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class EncryptionSizes:
    appends: int = 3200
    concurrency: int = 64
    recovery_events: int = 20_000
    repetitions: int = 3


def _event(seq_nr: int) -> Event:
    return Event(seq_nr, payload=JsonPayload.of({"n": seq_nr, "kind": "bench", "pad": _PAD}))


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

    async def read_recovery(self, events: int) -> tuple[float, float]:
        """The recovery read: events/s, and this process's CPU time, us an event."""
        started, cpu = time.perf_counter(), time.process_time()
        count = 0
        async for _ in self.journals.journal(self.recovery).read():
            count += 1
        if count != events:
            raise RuntimeError(f"the recovery read {count} events of {events}")
        return count / (time.perf_counter() - started), (time.process_time() - cpu) / count * 1e6


def opening_costs() -> tuple[float, float]:
    """ns an event: a page of the recovery's payloads opened as a read opens it, and the
    cipher's `decrypt` alone on envelopes of the same sizes (the floor any opening pays)."""
    cipher, journal_id = AESGCM(new_data_key()), "opening"
    payloads = [JsonPayload.of({"n": n, "kind": "bench", "pad": _PAD}) for n in range(_PAGE)]
    page = [
        EventRecord(Event(n, payload=seal(cipher, journal_id, n, payload)), _WHEN, 0, n)
        for n, payload in enumerate(payloads, 1)
    ]
    opener = Opener(cipher, journal_id)
    ready = []  # nonce, ciphertext and associated data of the envelope's sizes, made beforehand
    for n, payload in enumerate(payloads, 1):
        nonce, associated = os.urandom(12), f"{journal_id}{n:08}".encode()
        ready.append((nonce, cipher.encrypt(nonce, b"j" + payload.raw, associated), associated))

    def best(run: Callable[[], object]) -> float:
        times = []
        for _ in range(_TRIES):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        return min(times) / _PAGE * 1e9

    opening = best(lambda: opener.records(page))
    return opening, best(lambda: [cipher.decrypt(*inputs) for inputs in ready])


async def bench_encryption(base: Settings, sizes: EncryptionSizes) -> Section:
    section = Section(
        "Encrypted journals",
        METHOD.format(
            concurrency=sizes.concurrency,
            appends=sizes.appends,
            events=sizes.recovery_events,
            reps=sizes.repetitions,
            page=_PAGE,
            tries=_TRIES,
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
        await replicate_here(plain_settings, plain_store)
        await replicate_here(sealed_settings, sealed_store)

        rates: dict[str, list[float]] = {"plain": [], "sealed": []}
        reads: dict[str, list[float]] = {"plain": [], "sealed": []}
        cpu: dict[str, list[float]] = {"plain": [], "sealed": []}
        await plain.read_recovery(sizes.recovery_events)  # warm-up reads
        await sealed.read_recovery(sizes.recovery_events)
        for repetition in range(sizes.repetitions):
            order = [("plain", plain), ("sealed", sealed)]
            if repetition % 2:
                order.reverse()
            for name, deployment in order:
                rates[name].append(await deployment.appends(sizes.appends))
                rate, cpu_us = await deployment.read_recovery(sizes.recovery_events)
                reads[name].append(rate)
                cpu[name].append(cpu_us)

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
    # the recovery's client CPU an event (no goal: it explains the rate above, loaded or not)
    baseline, value = median(cpu["plain"]), median(cpu["sealed"])
    what = f"recovery of {sizes.recovery_events:,} events, client CPU"
    section.rows.append(Row(f"{what}, plain", baseline, "us/event", note=spread(cpu["plain"])))
    section.rows.append(
        Row(f"{what}, encrypted", value, "us/event", baseline=baseline, note=spread(cpu["sealed"]))
    )
    opening, cipher = opening_costs()
    section.rows.append(Row("opening: AESGCM.decrypt alone", cipher, "ns/event"))
    section.rows.append(
        Row("opening: a page as a read opens it", opening, "ns/event", baseline=cipher)
    )
    return section
