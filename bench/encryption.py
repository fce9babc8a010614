"""Encrypted journals against plain ones (issue 44, docs/erasure.md), in one run: appends of
one event at c=64, and the recovery of one long replicated journal, each read or append
through the direct client of a deployment with a key-encryption key and of one without.

Each deployment runs in a process of its own (`python -m bench.encryption CONCURRENCY
PADDING`, the deployment's settings in `KJ_*` variables, `KJ_KEK` on the encrypted side),
which this one drives: two deployments in one process were not measured alike (two plain ones
gave the second-connected 1.13x the first, BENCHMARKS.md), and each process's CPU is then its
side's alone. The side reads one JSON command a line on its stdin and answers each with one
JSON line on stdout; at the end of its stdin it closes and exits."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import string
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bench.common import Row, Section, median, spread, unique
from bench.environment import connected, quiet_cassandra, replicate_here, settings_for
from bench.group_member import REPO, member_env
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

METHOD = (
    "Two deployments on the same servers, each a fresh topic (3 partitions) and keyspace and a "
    "process of its own that this one drives, one side measuring at a time: plain, and with a "
    "key-encryption key (every payload sealed with its journal's AES-256-GCM key). "
    "Events are ~100-byte JSON whose padding is {padding} text (random letters: what real "
    "payloads are closer to; one letter repeated lz4-compresses to almost nothing, which only "
    "the plain side could profit from). Appends: {concurrency} journals, each given its key by "
    "a first append, then {appends:,} appends of one event at c={concurrency} a repetition "
    "(one task per journal, its appends one after the other, `Ack.VERIFIED`); appends/s, and "
    "the side's process's CPU an append. Recovery: one journal of {events:,} events (appends "
    "of 100), replicated to the store, read from seqNr 1 to its end with `journal.read()`, "
    "every event consumed; events/s. Each phase waits for a quiet Cassandra (no compaction or "
    "flush queued) and runs {warmups} untimed repetitions a side; then {reps} pairs of appends "
    "repetitions and {reads} of reads, the side going first swapped every pair (ABBA); medians "
    "(spread min..max), and the goal held to the median of the pairs' ratios. Client CPU: "
    "the side's process's CPU time (all its threads: the driver's decoding, the reading flow, "
    "the opening) over each recovery read, us an event: what a shared host's load blurs least. "
    "Opening: {page:,} events of the recovery's payload, in Appends of 100 each sealed once, "
    "decoded with their journal's opener (each payload opened as its event is built, as a read "
    "decodes them) against the same values decoded without it, and `AESGCM.decrypt` alone "
    "with its inputs ready (one call an Append), in memory, best of {tries}; ns an event."
)
# --encryption-control: the check that the pairing favours neither side
CONTROL = (
    " Here both sides are plain (no key-encryption key on either): their ratios measure the "
    "bench itself, and should be ~1.0x."
)
GOAL = 0.9  # issue 44: encrypted >= 0.9x plain
_PAD_LENGTH = 62
# distinct paddings, cycled: more than a Kafka batch holds, so lz4 finds no repeats in one
_PADS = 4096
_PAGE = 1000  # events opened at a time in the opening's measure: a store page's worth
_APPEND = 100  # events an Append in the opening's measure, as the recovery appends them
_TRIES = 5
_CLOSE_S = 60  # a side's process closing its deployment at the end of its stdin


@dataclass(frozen=True, slots=True)
class EncryptionSizes:
    appends: int = 3200
    concurrency: int = 64
    recovery_events: int = 20_000
    repetitions: int = 3
    reads: int = 9
    warmups: int = 2
    padding: Literal["random", "repeated"] = "random"
    control: bool = False  # both sides plain: the bench's own fairness (its ratios ~1.0x)


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
        "Encrypted journals" if not sizes.control else "Encrypted journals: plain twice",
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
        )
        + (CONTROL if sizes.control else ""),
    )
    other = "control" if sizes.control else "sealed"
    plain_settings = settings_for(base, "plain")
    other_settings = settings_for(base, other)
    kek = None if sizes.control else new_kek_text()
    # [plain, other] of each pair, in the order measured
    samples: dict[str, list[tuple[float, float]]] = {what: [] for what in _MEASURES}
    async with (
        _side(plain_settings, None, sizes) as plain,
        _side(other_settings, kek, sizes) as sealed,
    ):
        sides = (plain, sealed)
        await asyncio.gather(*(side.ready() for side in sides))

        async def phase(command: dict[str, object], pairs: int, rate: str, cpu: str) -> None:
            """Warm-ups on each side, then `pairs` pairs, the first side of each pair swapped
            every pair (ABBA): rates and CPU kept, [plain, other] a pair."""
            for side in sides:
                for _ in range(sizes.warmups):
                    await side.ask(command)
            for pair in range(pairs):
                answers: dict[_Side, dict[str, float]] = {}
                for side in sides[::-1] if pair % 2 else sides:
                    answers[side] = await side.ask(command)
                samples[rate].append((answers[plain]["rate"], answers[sealed]["rate"]))
                samples[cpu].append((answers[plain]["cpu"], answers[sealed]["cpu"]))

        section.notes.append(_waited(await plain.ask({"do": "quiet"}), "appends"))
        await phase(
            {"do": "appends", "count": sizes.appends}, sizes.repetitions, "appends", "append cpu"
        )
        for side in sides:
            await side.ask({"do": "write_recovery", "events": sizes.recovery_events})
        for side in sides:
            await side.ask({"do": "replicate"})
        section.notes.append(_waited(await plain.ask({"do": "quiet"}), "recovery"))
        await phase(
            {"do": "read_recovery", "events": sizes.recovery_events}, sizes.reads, "reads", "cpu"
        )

    name = "plain, second process" if sizes.control else "encrypted"
    recovery = f"recovery of {sizes.recovery_events:,} events"
    for what, key, unit, goal in (
        (f"appends (1 event, c={sizes.concurrency})", "appends", "appends/s", True),
        (f"appends (1 event, c={sizes.concurrency}), client CPU", "append cpu", "us/append", False),
        (recovery, "reads", "events/s", True),
        # the recovery's client CPU an event (no goal: it explains the rate, loaded or not)
        (f"{recovery}, client CPU", "cpu", "us/event", False),
    ):
        plain_values = [pair[0] for pair in samples[key]]
        other_values = [pair[1] for pair in samples[key]]
        baseline = median(plain_values)
        section.rows.append(Row(f"{what}, plain", baseline, unit, note=spread(plain_values)))
        section.rows.append(
            Row(f"{what}, {name}", median(other_values), unit, baseline, note=spread(other_values))
        )
        # the goal is held to the pairs' ratios: each pair measured its sides a moment apart,
        # so a load that drifts over the run moves both of a pair alike
        ratios = [pair[1] / pair[0] for pair in samples[key]]
        met = median(ratios) >= GOAL if goal and not sizes.control else None
        section.rows.append(
            Row(
                f"{what}, {name} / plain, each pair",
                median(ratios),
                "x",
                goal=f">= {GOAL}x" if met is not None else "",
                met=met,
                spread=spread(ratios),
                note=" ".join(f"{ratio:.2f}" for ratio in ratios),
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


_MEASURES = ("appends", "append cpu", "reads", "cpu")


def _waited(seconds: dict[str, float], before: str) -> str:
    """Both sides share Cassandra, and a phase measured during the last one's compactions
    swings with them (BENCHMARKS.md, the TLS runs): each phase waits for a quiet one."""
    return f"before {before}, waited {seconds['waited']:.1f} s for a quiet Cassandra"


# --- a side's process -------------------------------------------------------------------------


async def _serve(concurrency: int, padding: Literal["random", "repeated"]) -> None:
    """The side's process: its deployment connected and every journal given its key and
    seqNr 1, then "ready"; each command answered with what it measured."""
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    settings = Settings.from_env()
    async with connected(settings) as (journals, store):
        deployment = _Deployment(journals, concurrency, paddings(padding))
        await asyncio.gather(*(deployment.append_one(i) for i in deployment.ids))
        _answer({"ready": True})
        while line := await commands.readline():
            command = orjson.loads(line)
            match command["do"]:
                case "appends":
                    rate, cpu = await deployment.appends(command["count"])
                    _answer({"rate": rate, "cpu": cpu})
                case "write_recovery":
                    await deployment.write_recovery(command["events"])
                    _answer({})
                case "replicate":
                    await replicate_here(settings, store)
                    _answer({})
                case "quiet":
                    _answer({"waited": await quiet_cassandra(store)})
                case "read_recovery":
                    rate, cpu = await deployment.read_recovery(command["events"])
                    _answer({"rate": rate, "cpu": cpu})
                case other:
                    raise ValueError(f"no such command: {other!r}")


def _answer(answer: dict[str, object]) -> None:
    sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
    sys.stdout.buffer.flush()


class _Side:
    """The parent's handle on a side's process: one command at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def _read(self) -> dict[str, float]:
        assert self._process.stdout is not None
        line = await self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"a side's process ended ({await self._process.wait()})")
        answer: dict[str, float] = orjson.loads(line)
        return answer

    async def ready(self) -> None:
        await self._read()

    async def ask(self, command: dict[str, object]) -> dict[str, float]:
        assert self._process.stdin is not None
        self._process.stdin.write(orjson.dumps(command) + b"\n")
        await self._process.stdin.drain()
        return await self._read()


@asynccontextmanager
async def _side(
    settings: Settings, kek: str | None, sizes: EncryptionSizes
) -> AsyncIterator[_Side]:
    """A side's process on `settings` (with `kek`: the encrypted side), ended with the block:
    the end of its stdin closes it, and one that does not end is killed."""
    env = {
        key: value for key, value in member_env(settings).items() if not key.startswith("KJ_KEK")
    }
    if kek is not None:
        env["KJ_KEK"] = kek
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "bench.encryption", str(sizes.concurrency), sizes.padding],
        cwd=REPO,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        yield _Side(process)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), _CLOSE_S)
        except TimeoutError:
            process.kill()
            await process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.encryption", description=__doc__)
    parser.add_argument("concurrency", type=int)
    parser.add_argument("padding", choices=["random", "repeated"])
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.concurrency, args.padding))
    return 0


if __name__ == "__main__":
    sys.exit(main())
