"""The two Faust tables, keyed by the journal id's UTF-8 bytes.

Bytes keys and values keep Faust's serializers out ("raw"), so a key hashes to the same
partition in the changelog as the journal's records in the action topic, and the table has
as many partitions as the action topic (Faust refuses a write otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import faust

from journal.model import ActionRecord
from tables.values import HeadCache, Watermark


@dataclass(frozen=True, slots=True)
class JournalTables:
    watermarks: Any  # faust.Table[bytes, bytes]; faust's generics do not type-check
    heads: Any

    def watermark(self, journal_id: str) -> Watermark:
        return Watermark.decode(self.watermarks.get(journal_id.encode("utf-8")))

    def head_cache(self, journal_id: str) -> HeadCache:
        return HeadCache.decode(self.heads.get(journal_id.encode("utf-8")))

    def update(self, journal_id: str, actions: Sequence[ActionRecord], replicated: int) -> None:
        """Fold one journal's actions of a batch into both values, one write each.

        Call only while the agent iterates its stream, with the event of the last of `actions`
        as Faust's current event: Faust writes the changelog and the local store of the
        current event's partition.
        """
        key = journal_id.encode("utf-8")
        watermark = Watermark.decode(self.watermarks.get(key))
        head = HeadCache.decode(self.heads.get(key))
        for action in actions:
            watermark = watermark.apply(action)
            head = head.apply(action, replicated)
        self.watermarks[key] = watermark.encode()
        self.heads[key] = head.encode()


def define_tables(app: faust.App, partitions: int) -> JournalTables:
    def table(name: str, help: str) -> Any:
        return app.Table(name, key_type=bytes, value_type=bytes, partitions=partitions, help=help)

    return JournalTables(
        watermarks=table("watermarks", "per journal: last seqNr, deleteTo, last Purge"),
        heads=table("heads", "per journal: its Appends in Kafka not known to be replicated"),
    )
