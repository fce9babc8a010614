"""The direct client: `Journals` (`journals`), the facade a process opens to append, read,
delete, list and subscribe, and the parts it assembles: conditional appends (`conditional`),
listing ids (`listing`), snapshots (`snapshots`); `Deferred`, what a worker waits on while
`Journals` connects.

May import every other room of `journal/`; nothing in them imports it. Its satellites get the
few collaborators they use from `Journals`, never `Journals` itself.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

if TYPE_CHECKING:
    from journal.client.conditional import (
        CONDITIONAL_HEADERS,
        MAX_IDEMPOTENCY_KEY,
        FreshKey,
        check_idempotency_key,
    )
    from journal.client.deferred import Deferred
    from journal.client.erasure import Erasure, data_keys_of
    from journal.client.journals import Appending, Journal, Journals, append_events
    from journal.client.listing import DEFAULT_LIMIT, MAX_LIMIT, JournalIdPage
    from journal.client.reading import JournalInfo, ReadingFlow

_DOOR = {
    "Appending": "journals",
    "CONDITIONAL_HEADERS": "conditional",
    "DEFAULT_LIMIT": "listing",
    "Deferred": "deferred",
    "Erasure": "erasure",
    "FreshKey": "conditional",
    "Journal": "journals",
    "JournalIdPage": "listing",
    "JournalInfo": "reading",
    "Journals": "journals",
    "MAX_IDEMPOTENCY_KEY": "conditional",
    "MAX_LIMIT": "listing",
    "ReadingFlow": "reading",
    "append_events": "journals",
    "check_idempotency_key": "conditional",
    "data_keys_of": "erasure",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "CONDITIONAL_HEADERS",
    "DEFAULT_LIMIT",
    "MAX_IDEMPOTENCY_KEY",
    "MAX_LIMIT",
    "Appending",
    "Deferred",
    "Erasure",
    "FreshKey",
    "Journal",
    "JournalIdPage",
    "JournalInfo",
    "Journals",
    "ReadingFlow",
    "append_events",
    "check_idempotency_key",
    "data_keys_of",
]
