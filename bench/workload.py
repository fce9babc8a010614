"""What the scenarios write: events of about 300 bytes, and the same bytes as a raw record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaProducer

from bench.common import Timed
from journal import Event, JsonPayload
from journal.codec import encode_events, record_headers
from journal.core import AppendHeader, Events, Json, SeqRange
from journal.kafka import COMPRESSION, MAX_BATCH_BYTES
from kjconfig.access import KafkaAccess

PAD = "x" * 260  # with the JSON around it, an encoded event of about 300 bytes


def payload(seq_nr: int) -> dict[str, Json]:
    return {"n": seq_nr, "kind": "bench", "pad": PAD}


def events(first: int, count: int) -> list[Event]:
    return [
        Event(n, frozenset({"bench"}), JsonPayload.of(payload(n)))
        for n in range(first, first + count)
    ]


def http_body(first: int, count: int, numbered: bool = True) -> dict[str, Json]:
    """The events `first`.. as an HTTP append's body; not `numbered`, without their seqNrs
    (an append at the journal's end: the owner numbers them)."""
    return {
        "events": [
            ({"seqNr": n} if numbered else {}) | {"payload": payload(n), "tags": ["bench"]}
            for n in range(first, first + count)
        ]
    }


def raw_append(first: int, count: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The value and headers of the Append record the writer produces for these events."""
    batch = Events(tuple(events(first, count)))
    payload_type, value = encode_events(batch)
    header = AppendHeader(SeqRange(first, first + count - 1), payload_type)
    return value, record_headers(header, {})


def raw_producer(kafka: KafkaAccess) -> AIOKafkaProducer:
    """The raw baselines' producer: idempotent, acks=all, linger 0, and the writer's
    compression and batch size (not started)."""
    return AIOKafkaProducer(
        **kafka.client_options(),
        acks="all",
        enable_idempotence=True,
        linger_ms=0,
        compression_type=COMPRESSION,
        max_batch_size=MAX_BATCH_BYTES,
    )


async def closed_loop(
    operation: Callable[[int, int], Awaitable[object]], concurrency: int, total: int
) -> Timed:
    """`total` calls of `operation(lane, round)`, `concurrency` lanes each calling in sequence."""
    rounds = max(1, total // concurrency)
    latencies: list[float] = []

    async def lane(index: int) -> None:
        for round_ in range(rounds):
            started = time.perf_counter()
            await operation(index, round_)
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(lane(i) for i in range(concurrency)))
    return Timed(latencies, time.perf_counter() - started)
