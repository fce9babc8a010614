"""The worker's `RecordIndex`: the owner's tables say where a journal's unreplicated actions are.

Once the owner's agent has processed the partition up to the reader's fence, the two tables
list every action of the journal (above the partition's floor): the reader fetches those above
what the store holds, or, with the store down, all of them when they are the whole journal
(`Indexed.complete`). When this worker does not own the partition, or its agent is too far
behind, it answers `NotIndexed` and the reading flow scans instead (counted), or, with the
store down, answers that it cannot read the journal.
"""

from __future__ import annotations

from journal import JournalKey
from journal.core import BEHIND, IndexAnswer, Indexed, NotIndexed
from journal.metrics import METRICS
from tables.partitions import OwnedPartitions
from tables.tables import JournalTables


class TableIndex:
    def __init__(self, tables: JournalTables, owned: OwnedPartitions, wait_s: float) -> None:
        self._tables = tables
        self._owned = owned
        self._wait_s = wait_s

    def covered(self, partition: int) -> int:
        return self._owned.replicated(partition)

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        owned = self._owned
        if not owned.owns(partition):
            return _missed("not_owner")
        replicated = owned.replicated(partition)
        if (
            owned.processed(partition) < fence - 1
            and replicated >= fence - 1
            and replicated >= owned.floor(partition)
        ):
            # the store holds everything below the fence: no need to wait for the agent (where
            # it has got there, the tables answer: with the store down, they are what is read)
            return Indexed((), replicated)
        if not await owned.wait_for(partition, fence - 1, self._wait_s):
            # "behind": the agent publishes and will get there (with the store down the
            # reading flow then refuses at once: a scan would take the agent's CPU); else
            # the tables wait for the store to hold the gap before them
            return _missed(BEHIND if owned.publishing(partition) else "unpublished")
        if not owned.owns(partition):  # revoked between the agent's release and this reader
            return _missed("not_owner")
        appends, deletions = self._tables.runs(key.id, partition)  # together, no await between
        needs = max(appends.pruned_to, deletions.pruned_to, owned.floor(partition))
        runs = tuple(sorted((*appends.runs, *deletions.runs), key=lambda r: r.first))
        return Indexed(runs, needs, complete=needs == -1)

    async def close(self) -> None:
        return None


def _missed(reason: str) -> NotIndexed:
    METRICS.counter("kafka_journal_index_misses_total", reason=reason).inc()
    return NotIndexed(reason)
