"""A journal's head: its actions in Kafka that the store does not reflect yet, folded onto the
store's state with the one fold (`journal.core.fold`).

`fold_head` consumes the journal's action records in offset order (fetched by offset from what
an index listed, or found by a scan) and returns a `JournalHead`: the journal's state as of the
fence, whether a Purge voided the store's events, and the accepted Appends' events. Those are
held up to a byte budget; past it only their offsets are kept and the read fetches them again
as it streams, so memory stays bounded whatever the head's size (the only case where a read
touches a record twice; it needs replication stopped for long on a busy journal).

An Append whose events do not decode is skipped before folding, as replication quarantines it:
reads and the store fold the same actions.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from journal.codec.actions import events_of
from journal.codec.envelope import EnvelopeRefused, Opener
from journal.codec.errors import DecodeError
from journal.core.fold import JournalState, Verdict, count_rejected
from journal.core.index import RecordIndex
from journal.core.model import ActionRecord, EventRecord, JournalKey, MarkHeader, PurgeHeader
from journal.errors import InvalidValue
from journal.metrics import METRICS

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JournalHead:
    """What Kafka adds to the store's view of one journal, as of a fence.

    `state`: the journal as of the fence. `purge_offset`: the offset of the head's last Purge
    (None: none), so the store's events are void and so are snapshots taken before it
    (`journal.client.snapshots`). `events`: the accepted Appends' events in the head (after its last
    Purge), in seqNr order; `spilled`: offsets of accepted Appends whose events were not held (past
    the budget), to fetch again after `events`. `refused`: a held Append that did not open with
    the read's data key (`fold_head`'s opener), raised where the head's events are handed out.
    """

    state: JournalState
    purge_offset: int | None = None
    events: tuple[EventRecord, ...] = ()
    spilled: tuple[int, ...] = ()
    refused: EnvelopeRefused | None = None

    @property
    def purged(self) -> bool:
        return self.purge_offset is not None

    @classmethod
    def of_store(cls, state: JournalState) -> JournalHead:
        """The head when Kafka holds nothing newer than the store."""
        return cls(state)


class HeadOf(Protocol):
    """The reading flow's head of a journal (`Journals`), for the parts of the client that
    read: as of `until`, an offset of its partition (None: now), through `index` (None: the
    client's)."""

    async def __call__(
        self, key: JournalKey, until: int | None = None, index: RecordIndex | None = None
    ) -> JournalHead: ...


async def fold_head(
    base: JournalState,
    actions: AsyncIterable[ActionRecord],
    budget_bytes: int,
    opener: Opener | None = None,
) -> JournalHead:
    """Fold the journal's actions (offset order) onto `base`, the store's state; with the
    `opener` of the journal's data key, the events held opened as they are decoded (each built
    once). A sound Append that does not open is folded as any (never skipped as a malformed one
    is), and refused only where a read would hand its events out (`JournalHead.refused`)."""
    state = base
    purge_offset: int | None = None  # the last Purge folded
    events: list[EventRecord] = []
    spilled: list[int] = []
    held = 0
    refused: EnvelopeRefused | None = None  # the first held Append that did not open
    async for action in actions:
        refusal = None
        try:
            decoded = _events_or_skip(action, opener)
        except EnvelopeRefused as error:  # sound: a fault is named (and skipped) first
            decoded, refusal = (), error
        if decoded is None:
            continue
        state, verdict = state.apply(action.header, action.offset)
        if verdict is Verdict.APPENDED:
            if spilled or held + len(action.value) > budget_bytes:
                spilled.append(action.offset)  # refused, if so, when fetched again
            else:
                events.extend(decoded)
                held += len(action.value)
                refused = refused or refusal
        elif verdict is Verdict.PURGED:
            purge_offset, events, spilled, held, refused = action.offset, [], [], 0, None
        elif verdict.rejected:
            count_rejected(action.key, action, verdict)
    return JournalHead(state, purge_offset, tuple(events), tuple(spilled), refused)


async def fold_whole(
    actions: AsyncIterable[ActionRecord], budget_bytes: int, opener: Opener | None = None
) -> JournalHead | None:
    """The journal from Kafka alone, read from a log start past offset 0, for when the store
    cannot answer: None unless the journal's first record there is a Purge. Nothing else
    proves where it starts: an Append from seqNr 1 may be a rival's, rejected in a history
    that expired, and a Delete does not say which seqNrs followed it.
    """
    records = aiter(actions)
    async for action in records:
        if isinstance(action.header, MarkHeader):
            continue
        if not isinstance(action.header, PurgeHeader):
            return None
        head = await fold_head(JournalState(action.offset), records, budget_bytes, opener)
        return head if head.purged else replace(head, purge_offset=action.offset)
    return None


def _events_or_skip(action: ActionRecord, opener: Opener | None) -> Sequence[EventRecord] | None:
    """An action's events (none for other than Appends); None for an Append that is bad."""
    try:
        return events_of(action, opener)
    except (DecodeError, InvalidValue) as error:
        METRICS.counter("kafka_journal_malformed_records_skipped_total").inc()
        log.warning("skipping an Append at offset %s: %s", action.offset, error)
        return None
