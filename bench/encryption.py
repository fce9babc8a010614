"""Encrypted journals against plain ones (issue 44, docs/erasure.md), in one run: appends of
one event at c=64, and the recovery of one long replicated journal, each read or append
through the direct client of a deployment with a key-encryption key and of one without."""

from __future__ import annotations

import asyncio
import os
import random
import string
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import SecretStr

from bench.common import Row, Section, median, spread, unique
from bench.environment import connected, quiet_cassandra, replicate_here, settings_for
from journal import Event, Journals, JsonPayload
from journal.codec import (
    Opener,
    Sealer,
    data_key_id,
    decode_events,
    encode_events,
    new_data_key,
    new_kek_text,
)
from journal.core import Events
from journal.settings import Settings
from journal.store import CassandraStore

METHOD = (
    "Two deployments on the same servers, each a fresh topic (3 partitions) and keyspace: plain, "
    "and with a key-encryption key (every payload sealed with its journal's AES-256-GCM key). "
    "Events are ~100-byte JSON whose padding is {padding} text (random letters: what real "
    "payloads are closer to; one letter repeated lz4-compresses to almost nothing, which only "
    "the plain side could profit from). Appends: {concurrency} journals, each given its key by "
    "a first append, then {appends:,} appends of one event at c={concurrency} a repetition "
    "(one task per journal, its appends one after the other, `Ack.VERIFIED`); appends/s, and "
    "this process's CPU an append. Recovery: one journal of {events:,} events (appends of 100), "
    "replicated to the store, read from seqNr 1 to its end with `journal.read()`, every event "
    "consumed; events/s. Each phase waits for a quiet Cassandra (no compaction or flush "
    "queued) and runs {warmups} untimed repetitions a side; then the sides alternate, "
    "{reps} appends repetitions and {reads} reads each; medians (spread min..max). Client CPU: "
    "this process's CPU time (all its threads: the driver's decoding, the reading flow, the "
    "opening) over each recovery read, us an event: what a shared host's load blurs least. "
    "Opening: {page:,} events of the recovery's payload, in Appends of 100 each sealed once, "
    "decoded with their journal's opener (each payload opened as its event is built, as a read "
    "decodes them) against the same values decoded without it, and `AESGCM.decrypt` alone "
    "with its inputs ready (one call an Append), in memory, best of {tries}; ns an event."
)
GOAL = 0.9  # issue 44: encrypted >= 0.9x plain
_PAD_LENGTH = 62
# distinct paddings, cycled: more than a Kafka batch holds, so lz4 finds no repeats in one
_PADS = 4096
_PAGE = 1000  # events opened at a time in the opening's measure: a store page's worth
_APPEND = 100  # events an Append in the opening's measure, as the recovery appends them
_TRIES = 5


@dataclass(frozen=True, slots=True)
class EncryptionSizes:
    appends: int = 3200
    concurrency: int = 64
    recovery_events: int = 20_000
    repetitions: int = 3
    reads: int = 9
    warmups: int = 2
    padding: Literal["random", "repeated"] = "random"


def paddings(kind: Literal["random", "repeated"]) -> list[str]:
    """The events' paddings: random letters (seeded, so runs compare) or one letter repeated."""
    if kind == "repeated":
        return ["x" * _PAD_LENGTH]
    rng = random.Random(44)
    letters = string.ascii_letters
    return ["".join(rng.choices(letters, k=_PAD_LENGTH)) for _ in range(_PADS)]


class _Deployment:
    def __init__(self, journals: Journals, concurrency: int, pads: list[str]) -> None:
        self.journals = journals
        self.ids = [unique("append") for _ in range(concurrency)]
        self.next = dict.fromkeys(self.ids, 1)
        self.recovery = unique("recovery")
        self.pads = pads
        self.made = 0  # events made: picks the next padding

    def event(self, seq_nr: int) -> Event:
        pad = self.pads[self.made % len(self.pads)]
        self.made += 1
        return Event(seq_nr, payload=JsonPayload.of({"n": seq_nr, "kind": "bench", "pad": pad}))

    async def append_one(self, journal_id: str) -> None:
        seq_nr = self.next[journal_id]
        await self.journals.journal(journal_id).append([self.event(seq_nr)])
        self.next[journal_id] = seq_nr + 1

    async def appends(self, count: int) -> tuple[float, float]:
        """`count` appends over the journals at once: appends/s, and this process's CPU time,
        us an append."""
        per = count // len(self.ids)

        async def one_journal(journal_id: str) -> None:
            for _ in range(per):
                await self.append_one(journal_id)

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one_journal(i) for i in self.ids))
        done = per * len(self.ids)
        return done / (time.perf_counter() - started), (time.process_time() - cpu) / done * 1e6

    async def write_recovery(self, events: int) -> None:
        journal = self.journals.journal(self.recovery)
        for first in range(1, events + 1, 100):
            last = min(first + 99, events)
            await journal.append([self.event(n) for n in range(first, last + 1)])

    async def read_recovery(self, events: int) -> tuple[float, float]:
        """The recovery read: events/s, and this process's CPU time, us an event."""
        started, cpu = time.perf_counter(), time.process_time()
        count = 0
        async for _ in self.journals.journal(self.recovery).read():
            count += 1
        if count != events:
            raise RuntimeError(f"the recovery read {count} events of {events}")
        return count / (time.perf_counter() - started), (time.process_time() - cpu) / count * 1e6


def opening_costs() -> tuple[float, float, float]:
    """ns an event: a page of the recovery's payloads, Appends of `_APPEND` events each sealed
    once, decoded and opened as a read decodes them, the same decoded without the key, and the
    cipher's `decrypt` alone on envelopes of the same sizes (the floor any opening pays)."""
    raw_key, journal_id = new_data_key(), "opening"
    cipher, key_id = AESGCM(raw_key), data_key_id(raw_key)
    pads = paddings("random")
    payloads = [
        JsonPayload.of({"n": n, "kind": "bench", "pad": pads[n % len(pads)]}) for n in range(_PAGE)
    ]
    sealer = Sealer(cipher, journal_id, key_id=key_id)
    values = []  # the Appends' record values, as the store's rows hold them
    ready = []  # nonce, ciphertext and associated data of the envelopes' sizes, made beforehand
    for first in range(1, _PAGE + 1, _APPEND):
        events = [Event(n, payload=payloads[n - 1]) for n in range(first, first + _APPEND)]
        values.append(encode_events(Events(sealer.events(events))))
        plain = b"".join(b"j" + len(e.payload.raw).to_bytes(4) + e.payload.raw for e in events)  # type: ignore[union-attr]
        nonce, associated = os.urandom(12), f"{journal_id}{first:08}".encode()
        ready.append((nonce, cipher.encrypt(nonce, plain, associated), associated))
    opener = Opener(cipher, journal_id, key_id=key_id)

    def best(run: Callable[[], object]) -> float:
        times = []
        for _ in range(_TRIES):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        return min(times) / _PAGE * 1e9

    opening = best(lambda: [decode_events(kind, value, opener) for kind, value in values])
    sealed = best(lambda: [decode_events(kind, value) for kind, value in values])
    return opening, sealed, best(lambda: [cipher.decrypt(*inputs) for inputs in ready])


async def bench_encryption(base: Settings, sizes: EncryptionSizes) -> Section:
    section = Section(
        "Encrypted journals",
        METHOD.format(
            padding=sizes.padding,
            concurrency=sizes.concurrency,
            appends=sizes.appends,
            events=sizes.recovery_events,
            warmups=sizes.warmups,
            reps=sizes.repetitions,
            reads=sizes.reads,
            page=_PAGE,
            tries=_TRIES,
        ),
    )
    plain_settings = settings_for(base, "plain")
    sealed_settings = settings_for(base, "sealed").model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    pads = paddings(sizes.padding)
    samples: dict[str, dict[str, list[float]]] = {
        what: {"plain": [], "sealed": []} for what in ("appends", "append cpu", "reads", "cpu")
    }
    async with (
        connected(plain_settings) as (plain_journals, plain_store),
        connected(sealed_settings) as (sealed_journals, sealed_store),
    ):
        sides = {
            "plain": _Deployment(plain_journals, sizes.concurrency, pads),
            "sealed": _Deployment(sealed_journals, sizes.concurrency, pads),
        }

        def alternating(repetition: int) -> list[tuple[str, _Deployment]]:
            order = list(sides.items())
            return order[::-1] if repetition % 2 else order

        for deployment in sides.values():  # every journal has its key and seqNr 1
            await asyncio.gather(*(deployment.append_one(i) for i in deployment.ids))
        await _quiet(section, plain_store, "appends")

        async def phase(
            measure: Callable[[_Deployment], Awaitable[tuple[float, float]]],
            repetitions: int,
            rate_key: str,
            cpu_key: str,
        ) -> None:
            """Warm-ups on each side, then `repetitions` alternating: rates and CPU kept."""
            for deployment in sides.values():
                for _ in range(sizes.warmups):
                    await measure(deployment)
            for repetition in range(repetitions):
                for name, deployment in alternating(repetition):
                    rate, cpu_us = await measure(deployment)
                    samples[rate_key][name].append(rate)
                    samples[cpu_key][name].append(cpu_us)

        await phase(lambda d: d.appends(sizes.appends), sizes.repetitions, "appends", "append cpu")

        for deployment in sides.values():
            await deployment.write_recovery(sizes.recovery_events)
        await replicate_here(plain_settings, plain_store)
        await replicate_here(sealed_settings, sealed_store)
        await _quiet(section, plain_store, "recovery")
        await phase(lambda d: d.read_recovery(sizes.recovery_events), sizes.reads, "reads", "cpu")

    recovery = f"recovery of {sizes.recovery_events:,} events"
    for what, key, unit, goal in (
        (f"appends (1 event, c={sizes.concurrency})", "appends", "appends/s", True),
        (f"appends (1 event, c={sizes.concurrency}), client CPU", "append cpu", "us/append", False),
        (recovery, "reads", "events/s", True),
        # the recovery's client CPU an event (no goal: it explains the rate, loaded or not)
        (f"{recovery}, client CPU", "cpu", "us/event", False),
    ):
        plain, sealed = samples[key]["plain"], samples[key]["sealed"]
        baseline, value = median(plain), median(sealed)
        section.rows.append(Row(f"{what}, plain", baseline, unit, note=spread(plain)))
        section.rows.append(
            Row(
                f"{what}, encrypted",
                value,
                unit,
                baseline=baseline,
                goal=f">= {GOAL}x plain" if goal else "",
                met=value >= GOAL * baseline if goal else None,
                note=spread(sealed),
            )
        )
    opening, without_key, cipher = opening_costs()
    section.rows.append(Row("opening: AESGCM.decrypt alone", cipher, "ns/event"))
    section.rows.append(Row("opening: a page decoded without the key", without_key, "ns/event"))
    section.rows.append(
        Row(
            "opening: a page decoded as a read decodes it",
            opening,
            "ns/event",
            baseline=without_key,
        )
    )
    return section


async def _quiet(section: Section, store: CassandraStore, before: str) -> None:
    """Until Cassandra neither compacts nor flushes: both sides share it, and a phase measured
    during the last one's compactions swings with them (BENCHMARKS.md, the TLS runs)."""
    section.notes.append(
        f"before {before}, waited {await quiet_cassandra(store):.1f} s for a quiet Cassandra"
    )
