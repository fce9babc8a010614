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

A repair destroys only what the operator names, and only while it is called for:
- it acts only on a journal that is truncated now: the reading flow raises JournalTruncated
  for it (what HTTP answers 410 `journal_truncated`), and the store's pointer of its partition
  is still below Kafka's log start (a read's index learns late that replication passed the
  gap); otherwise it refuses, producing nothing;
- accepting the loss deletes up to the last seqNr of the store's row as of the gap (read
  before the check, and refused if the row holds an action Kafka still keeps: replication
  passed the gap meanwhile), never an event accepted after the gap;
- it prints what it will produce, then asks (or `--yes`); `--dry-run` stops there;
- after the consent it looks again, and produces only if the journal is still truncated and
  the plan is the same (the operator may have looked at the prompt while a worker passed the
  gap). A Delete carries no condition, so a window remains between that last look and the
  record; its deleteTo is bounded by the state before the gap, so what replication accepted
  after the gap survives it (the fold caps a Delete at the journal's seqNr as it is then).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from app.confirm import REFUSED_EXIT, UNAVAILABLE_EXIT, NotConfirmed, confirm, failed
from journal import JournalKey, Journals, Position
from journal.errors import JournalTruncated, Unavailable
from journal.settings import Settings

Decision = Literal["accept-loss", "purge"]


@dataclass(frozen=True, slots=True)
class Repair:
    """The action a decision takes on a journal: a Delete up to `delete_to`, a Purge, or
    nothing (`delete_to` None and not `purge`)."""

    purge: bool = False
    delete_to: int | None = None

    @property
    def produces(self) -> bool:
        return self.purge or self.delete_to is not None

    @property
    def record(self) -> str:
        """The record it produces, in a few words."""
        if self.purge:
            return "a Purge"
        if self.delete_to is not None:
            return f"a Delete up to seqNr {self.delete_to}"
        return "nothing"

    def describe(self) -> str:
        if self.purge:
            return f"{self.record}: the journal starts again, empty"
        if self.delete_to is not None:
            return f"{self.record}: the journal continues after it"
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


@dataclass(frozen=True, slots=True)
class Examined:
    """A journal as a repair finds it: the gap of its partition, why it is truncated (None: it
    reads), why the repair refuses (None: it may act), and the action it would take."""

    gap: Gap
    truncated: str | None
    refused: str | None
    action: Repair
    stored_offset: int | None  # the store's row's offset: the state the plan is bounded by


class RepairRefused(Exception):
    """The journal does not call for the repair (now): nothing was produced."""


async def examine(journals: Journals, key: JournalKey, decision: Decision) -> Examined:
    """Is `key` truncated now, and what would `decision` produce (module docstring)?"""
    partition = journals.writer.partition_of(key)
    # the row first: if the read after it is truncated, the row is from before the gap
    meta = await journals.store.meta(key)
    try:
        await journals.reading.view(key)
        truncated = None
    except JournalTruncated as error:
        truncated = str(error)
    pointer = (await journals.store.pointers(key.topic)).get(partition, -1)
    gap = Gap(partition, pointer, await journals.kafka.log_start(key.topic, partition))
    refused = None
    if truncated is None:
        refused = (
            f"journal {key.id} is not truncated: it reads in full now (a repair acts only on a "
            "journal whose read answers 410 journal_truncated)"
        )
    elif not gap.lost:
        # the read's index may not know yet that replication passed the gap; the store does
        refused = (
            f"journal {key.id} is not truncated: replication has passed the gap (store pointer "
            f"{gap.pointer}, Kafka from {gap.log_start}), its reads answer again"
        )
    elif meta is not None and meta.offset >= gap.log_start:
        refused = (
            f"journal {key.id}: the store holds an action of it at offset {meta.offset}, after "
            f"the gap (Kafka keeps offsets from {gap.log_start}): replication is passing it; "
            "look again"
        )
    action = plan_repair(decision, None if meta is None else meta.seq_nr)
    return Examined(gap, truncated, refused, action, None if meta is None else meta.offset)


# shown what a repair would produce, says whether to produce it (False: a dry run); raises
# NotConfirmed to refuse
Consent = Callable[[Examined], Awaitable[bool]]


async def repair(
    settings: Settings, journal_id: str, decision: Decision, consent: Consent
) -> tuple[Examined, Position | None]:
    """Examine the journal, ask `consent`, look again, and produce the action if the journal
    still calls for it: what was found, and where the action landed (None: nothing produced).
    RepairRefused when the journal does not call for it, or changed while `consent` asked."""
    async with await Journals.connect(settings) as journals:
        key = journals.journal(journal_id).key
        found = await examine(journals, key, decision)
        if found.refused is not None:
            raise RepairRefused(found.refused)
        if not await consent(found) or not found.action.produces:
            return found, None
        again = await examine(journals, key, decision)
        if again.refused is not None:
            raise RepairRefused(f"{again.refused}; nothing produced")
        if (again.action, again.stored_offset) != (found.action, found.stored_offset):
            raise RepairRefused(
                f"journal {journal_id} changed while you were asked (now: {again.action.record}); "
                "nothing produced: look again"
            )
        # the writer's, not the journal's delete/purge: those read the journal first, and a
        # read of a truncated journal fails
        if found.action.purge:
            return found, await journals.writer.purge(key, origin=journals.origin)
        assert found.action.delete_to is not None
        at = await journals.writer.delete(key, found.action.delete_to, origin=journals.origin)
        return found, at


def run_repair(
    settings: Settings, journal_id: str, decision: Decision, dry_run: bool, yes: bool
) -> int:
    """`repair`: print the gap and the plan, ask (or `yes`), produce; or refuse, saying why
    (exit codes: app/confirm.py)."""

    async def consent(found: Examined) -> bool:
        gap = found.gap
        print(
            f"{settings.topic}-{gap.partition}: {gap.lost} records expired before replication "
            f"(store pointer {gap.pointer}, Kafka from {gap.log_start})"
        )
        print(f"journal {journal_id}: truncated now: {found.truncated}")
        print(f"journal {journal_id}: the repair is {found.action.describe()}")
        if dry_run or not found.action.produces:
            return False
        question = f"produce {found.action.record} for journal {journal_id}?"
        await asyncio.to_thread(confirm, question, yes)
        return True

    try:
        found, at = asyncio.run(repair(settings, journal_id, decision, consent))
    except RepairRefused as refused:
        return failed("repair", str(refused), REFUSED_EXIT)
    except NotConfirmed as declined:
        return failed("repair", str(declined), declined.exit_code)
    except Unavailable as error:
        return failed("repair", f"unavailable: {error}; nothing produced", UNAVAILABLE_EXIT)
    if at is None:
        print(f"journal {journal_id}: nothing produced{' (dry run)' if dry_run else ''}")
    else:
        print(f"journal {journal_id}: produced {found.action.record} at {at.partition}:{at.offset}")
    return 0
