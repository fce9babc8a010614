"""Each aggregate's version at seqNr 1: what maps its versions to its journal's seqNrs.

One `Bases` per connection (connection.py builds it), shared by the recorders and the
snapshots (snapshots.py).
"""

from __future__ import annotations

from collections import OrderedDict

from eventsourcing.persistence import IntegrityError

from eventsourcing_kafka_journal.wire import decode_event
from journal import Journals


class Bases:
    """Each aggregate's version at seqNr 1 (the base of `wire.seq_nr_of`), least recently used
    first out (fixed once the journal's first Append is accepted: an aggregate is never purged
    by this module)."""

    def __init__(self, journals: Journals, capacity: int = 100_000) -> None:
        self._journals = journals
        self._capacity = capacity
        self._known: OrderedDict[str, int] = OrderedDict()

    async def read(self, journal_id: str) -> int | None:
        """The base, read from the journal's first event unless known; None without events."""
        known = self.get(journal_id)
        if known is not None:
            return known
        async for record in self._journals.journal(journal_id).read(1, 1, 1):
            decoded = decode_event(journal_id, record)
            if decoded is None:
                raise IntegrityError(f"journal {journal_id} was not written by this module")
            self.put(journal_id, decoded.base)
            return decoded.base
        return None

    def get(self, journal_id: str) -> int | None:
        base = self._known.get(journal_id)
        if base is not None:
            self._known.move_to_end(journal_id)
        return base

    def put(self, journal_id: str, base: int) -> None:
        self._known[journal_id] = base
        self._known.move_to_end(journal_id)
        if len(self._known) > self._capacity:
            self._known.popitem(last=False)
