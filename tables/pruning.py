"""The offset tables hold what Kafka holds: a journal's entry whose every offset left Kafka
(below the partition's log start, retention's or `delete_records`') and is replicated is
deleted, so a table does not grow with every journal ever written (issue 43).

Faust takes table writes, deletions included, only while the agent handles a record of the
partition (the changelog partition is the current event's), so pruning goes in steps, one per
flush of the partition's changes (`JournalTables.record`), each reading at most
`keys_per_step` entries of the partition from where the last step stopped. A sweep of the
partition ends at its last key; the next starts only once the bound moved (the log start, or
the store's pointer, went further): a partition whose log start does not move costs nothing.

The log starts are asked of Kafka in the background, at most every `interval_s`: a step never
waits for Kafka, it uses the starts known.

What a deletion means to readers: the journal's records below the bound are no longer listed,
so the partition's floor (`OwnedPartitions`) is raised to the highest offset dropped: a reader
then needs the store to reach it (it does: only replicated records are dropped), and with the
store down the tables no longer claim to hold the whole journal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from journal.metrics import METRICS
from tables.values import decode_runs

log = logging.getLogger(__name__)

# a topic and its partition count -> each partition's log start (its first record Kafka holds)
LogStarts = Callable[[str, int], Awaitable[dict[int, int]]]
# a table, a partition and a key to start from (None: the first) -> its entries from there,
# in key order
PartitionEntries = Callable[[Any, int, bytes | None], Iterator[tuple[bytes, bytes]]]

DEFAULT_PRUNE_KEYS_PER_STEP = 1_000  # entries read per step: ~2-5 ms of the agent's time
DEFAULT_PRUNE_INTERVAL_S = 60.0  # how often the log starts are asked of Kafka


@dataclass(slots=True)
class _Sweep:
    bound: int = 0  # entries whose offsets are all below it go
    swept: int = 0  # the bound of the last sweep that ended: nothing below it is left
    cursor: tuple[int, bytes] | None = None  # (table's index, key) the current sweep is at


@dataclass(slots=True)
class Pruning:
    topic: str  # the action topic, whose log starts bound the tables
    partitions: int
    log_starts: LogStarts
    entries: PartitionEntries
    keys_per_step: int = DEFAULT_PRUNE_KEYS_PER_STEP
    interval_s: float = DEFAULT_PRUNE_INTERVAL_S
    _starts: dict[int, int] = field(default_factory=dict)
    _asked_at: float = float("-inf")
    _asking: asyncio.Task[None] | None = None
    _sweeps: dict[int, _Sweep] = field(default_factory=dict)

    def step(
        self,
        tables: tuple[tuple[str, Any], ...],
        partition: int,
        replicated: int,
        busy: Callable[[bytes], bool],
    ) -> int:
        """One step over the partition's entries in `tables` (call while a record of the
        partition is Faust's current event); `replicated`: the store's pointer; `busy`: keys
        with changes not written yet (kept: they have a record above the bound). The highest
        offset dropped, -1 if none."""
        self._ask_log_starts()
        bound = min(self._starts.get(partition, 0), replicated + 1)
        sweep = self._sweeps.setdefault(partition, _Sweep())
        if sweep.cursor is None:
            if bound <= sweep.swept:
                return -1  # nothing can have left Kafka since the last sweep
            sweep.bound, sweep.cursor = bound, (0, b"")
        dropped, budget = -1, self.keys_per_step
        index, after = sweep.cursor
        while index < len(tables) and budget > 0:
            (name, table), last_key = tables[index], None
            for key, value in self.entries(table, partition, after or None):
                if key == after:
                    continue  # where the last step stopped: seen
                budget -= 1
                last_key = key
                runs = decode_runs(value)
                last = runs.runs[-1].last if runs.runs else runs.pruned_to
                if last < sweep.bound and not busy(key):
                    del table[key]  # a changelog tombstone, in the current event's partition
                    dropped = max(dropped, last)
                    METRICS.counter("kafka_journal_table_keys_pruned_total", table=name).inc()
                if budget == 0:
                    break
            if budget == 0 and last_key is not None:
                sweep.cursor = (index, last_key)
                return dropped
            index, after = index + 1, b""
        sweep.swept, sweep.cursor = sweep.bound, None
        return dropped

    def forget(self, partition: int) -> None:
        """The partition went: a later owner sweeps it from the start."""
        self._sweeps.pop(partition, None)

    def _ask_log_starts(self) -> None:
        now = time.monotonic()
        if now - self._asked_at < self.interval_s or self._asking is not None:
            return
        self._asked_at = now
        self._asking = asyncio.get_running_loop().create_task(self._learn())

    async def _learn(self) -> None:
        try:
            self._starts = await self.log_starts(self.topic, self.partitions)
        except Exception as error:  # Kafka unreachable: the starts known stay, asked again later
            log.warning("the log starts of %s could not be read: %r", self.topic, error)
        finally:
            self._asking = None

    async def close(self) -> None:
        if self._asking is not None:
            self._asking.cancel()
