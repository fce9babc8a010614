"""Kafka Journal's direct client: what a user imports.

    from journal import Event, JsonPayload, Journals, Settings

    async with await Journals.connect(Settings.from_env()) as journals:
        await journals.journal("order-1").append([Event(1, payload=JsonPayload({"n": 1}))])

The model's types and the errors (all under `JournalError`) load with the package; `Journals`
and what its methods return load on first use, so `import journal` stays light for what needs
none of the drivers (settings for a command line's --help, the codec in a Spark job).

The rooms: `journal.core` (the domain, no I/O), `journal.codec` (the wire format),
`journal.kafka` (everything that talks to Kafka), `journal.store` (the eventual store),
`journal.client` (the `Journals` facade); docs/architecture.md tours them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from journal.core.model import (
    SEQ_NR_MAX,
    Ack,
    Appended,
    BinaryPayload,
    Deleted,
    Event,
    EventRecord,
    HeaderMetadata,
    JournalKey,
    JsonPayload,
    NewEvent,
    Payload,
    PayloadMetadata,
    Position,
    TextPayload,
)
from journal.errors import (
    AccessDenied,
    AppendTooLarge,
    IdempotencyKeyReused,
    IdempotencyUnresolved,
    InvalidValue,
    JournalErased,
    JournalError,
    JournalTruncated,
    KafkaAccessDenied,
    KafkaUnavailable,
    OutcomeUnknown,
    SeqNrConflict,
    SetupMissing,
    SnapshotBeyondJournal,
    SnapshotTooLarge,
    StoreAccessDenied,
    StoreUnavailable,
    Unavailable,
    UndecodableBatch,
)

if TYPE_CHECKING:
    from journal.client.journals import Journal, Journals
    from journal.client.listing import JournalIdPage
    from journal.client.reading import JournalInfo
    from journal.replication.quarantine import Quarantined
    from journal.settings import Settings
    from journal.store.base import Snapshot
    from journal.subscriptions.groups import EventPosition, GroupEvent, GroupStatus
    from journal.subscriptions.subscription import Heartbeat, SubscribedEvent, SubscriptionPosition
    from kjconfig.settings import SettingsError

# loaded on first use: name -> its module
_LAZY = {
    "Journals": "journal.client.journals",
    "Journal": "journal.client.journals",
    "JournalInfo": "journal.client.reading",
    "JournalIdPage": "journal.client.listing",
    "SubscribedEvent": "journal.subscriptions.subscription",
    "Heartbeat": "journal.subscriptions.subscription",
    "SubscriptionPosition": "journal.subscriptions.subscription",
    "Snapshot": "journal.store.base",
    "EventPosition": "journal.subscriptions.groups",
    "GroupEvent": "journal.subscriptions.groups",
    "GroupStatus": "journal.subscriptions.groups",
    "Quarantined": "journal.replication.quarantine",
    "Settings": "journal.settings",
    "SettingsError": "kjconfig.settings",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'journal' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "SEQ_NR_MAX",
    "AccessDenied",
    "Ack",
    "AppendTooLarge",
    "Appended",
    "BinaryPayload",
    "Deleted",
    "Event",
    "EventPosition",
    "EventRecord",
    "GroupEvent",
    "GroupStatus",
    "HeaderMetadata",
    "Heartbeat",
    "IdempotencyKeyReused",
    "IdempotencyUnresolved",
    "InvalidValue",
    "Journal",
    "JournalErased",
    "JournalError",
    "JournalIdPage",
    "JournalInfo",
    "JournalKey",
    "JournalTruncated",
    "Journals",
    "JsonPayload",
    "KafkaAccessDenied",
    "KafkaUnavailable",
    "NewEvent",
    "OutcomeUnknown",
    "Payload",
    "PayloadMetadata",
    "Position",
    "Quarantined",
    "SeqNrConflict",
    "Settings",
    "SettingsError",
    "SetupMissing",
    "Snapshot",
    "SnapshotBeyondJournal",
    "SnapshotTooLarge",
    "StoreAccessDenied",
    "StoreUnavailable",
    "SubscribedEvent",
    "SubscriptionPosition",
    "TextPayload",
    "Unavailable",
    "UndecodableBatch",
]
