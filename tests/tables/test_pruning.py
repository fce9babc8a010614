"""A pruning step reads at most its bound of entries, deletes those whose records all left
Kafka and are replicated, keeps those with changes pending, and a finished sweep costs nothing
until the bound moves."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from journal.core.index import OffsetRuns
from tables.pruning import Pruning
from tables.values import encode_runs


class Table(dict[bytes, bytes]):
    """A table as pruning sees it, counting the entries read."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0


def entries(table: Any, partition: int, from_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    for key in sorted(k for k in table if from_key is None or k >= from_key):
        table.read += 1
        yield key, table[key]


def runs(*offsets: int) -> bytes:
    value = OffsetRuns()
    for offset in offsets:
        value = value.add(offset)
    return encode_runs(value)


async def test_steps_are_bounded_and_delete_only_what_left_kafka_and_is_replicated() -> None:
    starts = {0: 10}

    async def log_starts(topic: str, partitions: int) -> dict[int, int]:
        return starts

    appends, deletions = Table(), Table()
    for n in range(7):
        appends[b"gone%d" % n] = runs(n)  # below the log start, replicated
    appends[b"kept"] = runs(3, 12)  # a record still in Kafka
    appends[b"busy"] = runs(4)  # changes pending: its next record is above the bound
    deletions[b"gone0"] = runs(8)
    pruning = Pruning("t", 1, log_starts, entries, keys_per_step=3, interval_s=3600)
    tables = (("appends", appends), ("deletions", deletions))

    def step(replicated: int = 20) -> int:
        return pruning.step(tables, 0, replicated, lambda key: key == b"busy")

    assert step() == -1  # the log starts are not known yet: asked in the background
    await asyncio.sleep(0)  # the question's task answers at once here
    dropped, reads = [], []
    while True:
        before = appends.read + deletions.read
        dropped.append(step())
        reads.append(appends.read + deletions.read - before)
        if len(appends) == 2 and not deletions:
            break
    assert max(reads) <= 3 + 1  # the bound, and the key a step resumes after
    assert max(dropped) == 8
    assert sorted(appends) == [b"busy", b"kept"]
    before = appends.read
    assert step() == -1  # swept: nothing read until the bound moves
    assert step() == -1 and appends.read == before


async def test_nothing_unreplicated_goes() -> None:
    async def log_starts(topic: str, partitions: int) -> dict[int, int]:
        return {0: 10}

    appends = Table()
    appends[b"a"] = runs(5)
    pruning = Pruning("t", 1, log_starts, entries, keys_per_step=10, interval_s=3600)
    pruning.step((("appends", appends),), 0, 20, lambda key: False)
    await asyncio.sleep(0)
    # the store holds up to 4 only: record 5 left Kafka unreplicated, its entry stays
    assert pruning.step((("appends", appends),), 0, 4, lambda key: False) == -1
    assert b"a" in appends
