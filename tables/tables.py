"""The two Faust tables, keyed by the journal id's UTF-8 bytes.

Bytes keys and values keep Faust's serializers out ("raw"), so a key hashes to the same
partition in the changelog as the journal's records in the action topic, and the table has
as many partitions as the action topic (Faust refuses a write otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from journal.index import OffsetRuns
from journal.model import ActionRecord, AppendHeader, DeleteHeader, PurgeHeader
from tables.values import decode_runs, encode_runs


@dataclass(frozen=True, slots=True)
class JournalTables:
    heads: Any  # faust.Table[bytes, bytes]; faust's generics do not type-check
    watermarks: Any

    def runs(self, journal_id: str) -> tuple[OffsetRuns, OffsetRuns]:
        """The journal's Append offsets and its Delete and Purge offsets."""
        key = journal_id.encode("utf-8")
        return decode_runs(self.heads.get(key)), decode_runs(self.watermarks.get(key))

    def record(self, action: ActionRecord, replicated: int) -> None:
        """Note where `action` is; prune what the store holds (up to `replicated`).

        Call only while the agent iterates its stream, with the action's event as Faust's
        current event: Faust writes the changelog of the current event's partition.
        """
        header = action.header
        if isinstance(header, AppendHeader):
            table = self.heads
        elif isinstance(header, (DeleteHeader, PurgeHeader)):
            table = self.watermarks
        else:
            return  # a Mark changes nothing
        key = action.key.id.encode("utf-8")
        runs = decode_runs(table.get(key)).after(replicated).add(action.offset)
        table[key] = encode_runs(runs)


def define_tables(app: faust.App, partitions: int) -> JournalTables:
    def table(name: str, help: str) -> Any:
        return app.Table(name, key_type=bytes, value_type=bytes, partitions=partitions, help=help)

    return JournalTables(
        heads=table("head-cache", "per journal: offsets of its Appends not known replicated"),
        watermarks=table(
            "deletion-watermarks",
            "per journal: offsets of its Deletes and Purges not known replicated",
        ),
    )
