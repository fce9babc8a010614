"""`kafka-journal repair ID --accept-loss | --purge`: an operator's answer to a truncated
journal (410 `journal_truncated`), given through actions, never by editing Cassandra.

The state: records of the journal's partition expired from Kafka (retention) before
replication stored them: the store's pointer is below Kafka's log start. Reads that need the
gap fail (JournalTruncated) until replication passes it, which a running worker does on its own
(it starts at the log start, and logs and counts the records lost:
`kafka_journal_records_expired_unreplicated_total`). What the journal lost cannot be known:
its actions in the gap are gone (Appends, a Delete, a Purge). After the gap the journal is what
the store held before it, with the records Kafka still holds folded on top (an Append that does
not continue it is rejected as a conflict).

The operator's decision, for each journal the 410 names:
- accept the loss (`--accept-loss`): what the store held from before the gap may lack actions
  lost in it, so it is deleted: a Delete up to the journal's last seqNr as stored, the gap's end
  for this journal. The journal continues after it: its next seqNr follows, and the actions Kafka
  still holds after the gap are folded as usual. Nothing stored: nothing to delete.
- purge (`--purge`): a Purge: the journal starts again, empty, at seqNr 1 (the application
  writes it anew, from its own source).
Either action is produced now and folded where it lands, after the gap; reads answer again once
replication has passed the gap.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from journal.client.journals import Journals
from journal.settings import Settings

Decision = Literal["accept-loss", "purge"]


@dataclass(frozen=True, slots=True)
class Repair:
    """The action a decision takes on a journal: a Delete up to `delete_to`, a Purge, or
    nothing (`delete_to` None and not `purge`)."""

    purge: bool = False
    delete_to: int | None = None

    def describe(self) -> str:
        if self.purge:
            return "a Purge: the journal starts again, empty"
        if self.delete_to is not None:
            return f"a Delete up to seqNr {self.delete_to}: the journal continues after it"
        return "nothing: the store holds no event of it to delete"


def plan_repair(decision: Decision, stored_seq_nr: int | None) -> Repair:
    """The one decision (module docstring): `stored_seq_nr` is the journal's last seqNr as the
    store holds it (None: none stored)."""
    if decision == "purge":
        return Repair(purge=True)
    return Repair(delete_to=stored_seq_nr)


@dataclass(frozen=True, slots=True)
class Gap:
    """The journal's partition: the store's pointer and Kafka's log start."""

    partition: int
    pointer: int
    log_start: int

    @property
    def lost(self) -> int:
        """Offsets expired before replication (0: no gap now)."""
        return max(0, self.log_start - self.pointer - 1)


async def repair(settings: Settings, journal_id: str, decision: Decision) -> tuple[Gap, Repair]:
    """Produce the action `decision` takes on the journal; the gap seen and the action."""
    async with await Journals.connect(settings) as journals:
        key = journals.journal(journal_id).key
        partition = journals.writer.partition_of(key)
        pointer = (await journals.store.pointers(key.topic)).get(partition, -1)
        gap = Gap(partition, pointer, await journals.kafka.log_start(key.topic, partition))
        meta = await journals.store.meta(key)
        action = plan_repair(decision, None if meta is None else meta.seq_nr)
        # the writer's, not the journal's delete/purge: those read the journal first, and a
        # read of a truncated journal fails
        if action.purge:
            await journals.writer.purge(key, origin=journals.origin)
        elif action.delete_to is not None:
            await journals.writer.delete(key, action.delete_to, origin=journals.origin)
        return gap, action


def run_repair(settings: Settings, journal_id: str, decision: Decision) -> int:
    """`repair`, and print the gap seen and the action taken."""
    gap, action = asyncio.run(repair(settings, journal_id, decision))
    where = f"{settings.topic}-{gap.partition}"
    if gap.lost:
        print(
            f"{where}: {gap.lost} records expired before replication (store pointer "
            f"{gap.pointer}, Kafka from {gap.log_start}); reads of it answer once "
            "replication has passed them (a running worker does)"
        )
    else:
        print(f"{where}: no records are missing between the store and Kafka now")
    print(f"journal {journal_id}: {action.describe()}")
    return 0
