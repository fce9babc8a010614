"""The two Faust tables, keyed by the journal id's UTF-8 bytes.

Bytes keys and values keep Faust's serializers out ("raw"), so a key hashes to the same
partition in the changelog as the journal's records in the action topic, and the table has
as many partitions as the action topic (Faust refuses a write otherwise).

**Written once per journal per flush, not per record.** A table write is a changelog record
(Kafka traffic) and a local store write; a busy journal's runs change with every record. So the
agent's changes wait in memory, per partition (`_Pending`, what readers see first), and are
written when the partition has had `FLUSH_RECORDS` records, `FLUSH_JOURNALS` journals changed
or `FLUSH_INTERVAL_S` since its last flush: a write takes its changelog partition from Faust's
current event, so a partition's changes can only be written while one of its records is
handled. Changes a crash or a revocation loses cost nothing: a new owner trusts its tables only
once the store holds what came before its first record (`agents/replication.py`, the
partition's floor).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import faust

from journal.core import ActionRecord, AppendHeader, DeleteHeader, OffsetRuns, PurgeHeader
from journal.kafka import log_starts
from kjconfig.access import KafkaAccess
from tables.limits import DEFAULT_RESTORE_AHEAD_MIN
from tables.pruning import DEFAULT_PRUNE_INTERVAL_S, DEFAULT_PRUNE_KEYS_PER_STEP, Pruning
from tables.store import RocksMemory, SharedChangelogEnds, add_index_table, partition_entries
from tables.values import decode_runs, encode_runs

FLUSH_RECORDS = 500  # a partition's records between two flushes of its changes, at most
FLUSH_INTERVAL_S = 1.0  # ... or this long, once a record of the partition comes
# ... or this many journals changed: Faust's producer buffer holds 100 changelog records, and
# past it Faust pauses the stream until it drains (a flush of 500 journals stalled the agent)
FLUSH_JOURNALS = 64


@dataclass(slots=True)
class _Pending:
    """A partition's changes not written to the tables yet, per table and key."""

    appends: dict[bytes, OffsetRuns] = field(default_factory=dict)
    deletions: dict[bytes, OffsetRuns] = field(default_factory=dict)
    records: int = 0
    since: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class JournalTables:
    appends: Any  # faust.Table[bytes, bytes]; faust's generics do not type-check
    deletions: Any
    pruning: Pruning | None = None  # None: entries are never deleted (tests' tables)
    _pending: dict[int, _Pending] = field(default_factory=dict)

    def runs(self, journal_id: str, partition: int) -> tuple[OffsetRuns, OffsetRuns]:
        """The journal's Append offsets and its Delete and Purge offsets."""
        key = journal_id.encode("utf-8")
        pending = self._pending.get(partition, _NOTHING_PENDING)
        return _current(self.appends, pending.appends, key), _current(
            self.deletions, pending.deletions, key
        )

    def record(self, action: ActionRecord, replicated: int) -> int:
        """Note where `action` is; `replicated` (the store's pointer) says which of the
        journal's runs merge first when it has too many (journal/core/index.py). Runs the
        store holds are kept: with the store down, a read of the journal fetches them (its
        own records) instead of scanning the partition, for as long as Kafka holds them
        (`tables.pruning` deletes them after, a step per flush).

        Call only while the agent iterates its stream, with the action's event as Faust's
        current event: a flush writes the changelog of the current event's partition.
        The highest offset a pruning step dropped from the tables (-1: none): the partition's
        floor must reach it.
        """
        partition = action.partition
        pending = self._pending.setdefault(partition, _Pending())
        header = action.header
        if isinstance(header, AppendHeader):
            table, changes = self.appends, pending.appends
        elif isinstance(header, (DeleteHeader, PurgeHeader)):
            table, changes = self.deletions, pending.deletions
        else:
            table = changes = None  # a Mark changes nothing
        if table is not None and changes is not None:
            key = action.key.id.encode("utf-8")
            changes[key] = _current(table, changes, key).add(action.offset, replicated)
        pending.records += 1
        if (
            pending.records >= FLUSH_RECORDS
            or len(pending.appends) + len(pending.deletions) >= FLUSH_JOURNALS
            or time.monotonic() - pending.since >= FLUSH_INTERVAL_S
        ):
            self._flush(partition, pending)
            if self.pruning is not None:
                return self.pruning.step(
                    ((APPENDS_TABLE, self.appends), (DELETIONS_TABLE, self.deletions)),
                    partition,
                    replicated,
                    lambda key: (
                        key in self._pending[partition].appends
                        or key in self._pending[partition].deletions
                    ),
                )
        return -1

    def forget(self, partition: int) -> None:
        """The partition went: its unwritten changes are of no use to anyone (module doc)."""
        self._pending.pop(partition, None)
        if self.pruning is not None:
            self.pruning.forget(partition)

    async def close(self) -> None:
        if self.pruning is not None:
            await self.pruning.close()

    def _flush(self, partition: int, pending: _Pending) -> None:
        for table, changes in (
            (self.appends, pending.appends),
            (self.deletions, pending.deletions),
        ):
            for key, runs in changes.items():
                table[key] = encode_runs(runs)
        self._pending[partition] = _Pending()


_NOTHING_PENDING = _Pending()


def _current(table: Any, pending: dict[bytes, OffsetRuns], key: bytes) -> OffsetRuns:
    runs = pending.get(key)
    return runs if runs is not None else decode_runs(table.get(key))


# the appends table's name: its changelog topic's too; forwarding asks its owners by it
APPENDS_TABLE = "append-offsets"
DELETIONS_TABLE = "deletion-offsets"


def define_tables(
    app: faust.App,
    partitions: int,
    kafka: KafkaAccess,
    topic: str,
    prune_keys_per_step: int = DEFAULT_PRUNE_KEYS_PER_STEP,
    prune_interval_s: float = DEFAULT_PRUNE_INTERVAL_S,
    memory: RocksMemory | None = None,
    restore_ahead_min: int = DEFAULT_RESTORE_AHEAD_MIN,
    ends: SharedChangelogEnds | None = None,
) -> JournalTables:
    """The tables of action topic `topic`; a partition's local state its changelog no longer
    holds is dropped (`tables.store`): `kafka` is where the changelogs' ends and the topic's
    log starts are asked; entries whose records left the topic are deleted (`tables.pruning`)
    `prune_keys_per_step` at a time; their RocksDB databases share the worker's `memory`; a
    partition with at least `restore_ahead_min` changelog records to restore is read ahead of
    Faust's recovery (`tables.store`)."""

    def table(name: str, help: str) -> Any:
        return add_index_table(app, kafka, partitions, name, help, memory, restore_ahead_min, ends)

    return JournalTables(
        appends=table(APPENDS_TABLE, "per journal: offsets of its Appends"),
        deletions=table(DELETIONS_TABLE, "per journal: offsets of its Deletes and Purges"),
        pruning=Pruning(
            topic,
            partitions,
            functools.partial(log_starts, kafka),
            partition_entries,
            keys_per_step=prune_keys_per_step,
            interval_s=prune_interval_s,
        ),
    )
