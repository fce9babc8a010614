"""The journal's domain, without I/O: the model (`model`), the one fold that decides every
action (`fold`), the offset runs an index keeps per journal (`index`), and readers waiting
for an offset (`waiters`).

Imports nothing of the other rooms (codec, kafka, store, client); only `journal.errors` and
`journal.metrics` beside itself.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

if TYPE_CHECKING:
    from journal.core.fold import JournalState, JournalWrite, Verdict
    from journal.core.grow import (
        SEAL_AFTER_LEASES,
        SEAL_ID,
        Grow,
        Phase,
        Step,
        check_multiple,
        new_topic_of,
        next_step,
        partition_state,
        seal_wait_s,
    )
    from journal.core.index import BEHIND, IndexAnswer, Indexed, NotIndexed, OffsetRuns
    from journal.core.model import (
        SEQ_NR_MAX,
        SEQ_NR_MIN,
        Ack,
        ActionRecord,
        AppendHeader,
        BinaryPayload,
        Deleted,
        DeleteHeader,
        Event,
        EventRecord,
        Events,
        InvalidValue,
        JournalKey,
        Json,
        JsonPayload,
        NewEvent,
        Payload,
        PayloadMetadata,
        PayloadType,
        Position,
        PurgeHeader,
        SeqRange,
        TextPayload,
        json_payload,
    )
    from journal.core.waiters import OffsetWaiters

_DOOR = {
    "partition_state": "grow",
    "next_step": "grow",
    "new_topic_of": "grow",
    "check_multiple": "grow",
    "Step": "grow",
    "Phase": "grow",
    "Grow": "grow",
    "SEAL_ID": "grow",
    "seal_wait_s": "grow",
    "SEAL_AFTER_LEASES": "grow",
    "Ack": "model",
    "BEHIND": "index",
    "ActionRecord": "model",
    "AppendHeader": "model",
    "BinaryPayload": "model",
    "DeleteHeader": "model",
    "Deleted": "model",
    "Event": "model",
    "EventRecord": "model",
    "Events": "model",
    "IndexAnswer": "index",
    "Indexed": "index",
    "InvalidValue": "model",
    "JournalKey": "model",
    "JournalState": "fold",
    "JournalWrite": "fold",
    "Json": "model",
    "JsonPayload": "model",
    "NewEvent": "model",
    "NotIndexed": "index",
    "OffsetRuns": "index",
    "OffsetWaiters": "waiters",
    "Payload": "model",
    "PayloadMetadata": "model",
    "PayloadType": "model",
    "Position": "model",
    "PurgeHeader": "model",
    "SEQ_NR_MAX": "model",
    "SEQ_NR_MIN": "model",
    "SeqRange": "model",
    "TextPayload": "model",
    "Verdict": "fold",
    "json_payload": "model",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "BEHIND",
    "SEAL_AFTER_LEASES",
    "SEAL_ID",
    "SEQ_NR_MAX",
    "SEQ_NR_MIN",
    "Ack",
    "ActionRecord",
    "AppendHeader",
    "BinaryPayload",
    "DeleteHeader",
    "Deleted",
    "Event",
    "EventRecord",
    "Events",
    "Grow",
    "IndexAnswer",
    "Indexed",
    "InvalidValue",
    "JournalKey",
    "JournalState",
    "JournalWrite",
    "Json",
    "JsonPayload",
    "NewEvent",
    "NotIndexed",
    "OffsetRuns",
    "OffsetWaiters",
    "Payload",
    "PayloadMetadata",
    "PayloadType",
    "Phase",
    "Position",
    "PurgeHeader",
    "SeqRange",
    "Step",
    "TextPayload",
    "Verdict",
    "check_multiple",
    "json_payload",
    "new_topic_of",
    "next_step",
    "partition_state",
    "seal_wait_s",
]
