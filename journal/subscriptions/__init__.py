"""Subscriptions: every accepted event of a topic in log order, resumable from a position
(`subscription`), and subscription groups that share a topic's partitions and resume at a
committed checkpoint (`groups`).

May import `journal.kafka`, `journal.store`, `journal.codec`, `journal.core` and the shared
modules; never `journal.client` or `journal.replication`.

The door: what the rooms above `journal/` use of this room, each name loaded from its
module on first use (`journal.doors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from journal.doors import door

# a member's unacknowledged records at most (`KJ_GROUP_MAX_UNACKED`): here, where the settings
# take it without loading a driver
DEFAULT_MAX_UNACKED = 10_000

if TYPE_CHECKING:
    from journal.subscriptions.groups import (
        GROUP_PREFIX,
        EventPosition,
        GroupEvent,
        GroupMember,
        GroupStatus,
        commit_reset,
        group_id,
        group_statuses,
        plan_reset,
        reset_group,
    )
    from journal.subscriptions.subscription import (
        Heartbeat,
        SubscribedEvent,
        SubscriptionItem,
        SubscriptionPosition,
    )

_DOOR = {
    "EventPosition": "groups",
    "GROUP_PREFIX": "groups",
    "GroupEvent": "groups",
    "GroupMember": "groups",
    "GroupStatus": "groups",
    "Heartbeat": "subscription",
    "SubscribedEvent": "subscription",
    "SubscriptionItem": "subscription",
    "SubscriptionPosition": "subscription",
    "commit_reset": "groups",
    "group_id": "groups",
    "group_statuses": "groups",
    "plan_reset": "groups",
    "reset_group": "groups",
}
__getattr__ = door(__name__, _DOOR)
__all__ = [
    "GROUP_PREFIX",
    "EventPosition",
    "GroupEvent",
    "GroupMember",
    "GroupStatus",
    "Heartbeat",
    "SubscribedEvent",
    "SubscriptionItem",
    "SubscriptionPosition",
    "commit_reset",
    "group_id",
    "group_statuses",
    "plan_reset",
    "reset_group",
]
