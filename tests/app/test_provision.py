"""The journal's rights on the secured stack, as data: what each principal may do, and
nothing more; and those a grow gives the grown topic."""

from __future__ import annotations

from app.grow import mirrored
from app.provision import journal_acls
from journal.kafka.acls import Acl, AclOperation, AclPattern, AclPermission, AclResource


def rights(principal: str) -> set[str]:
    acls = journal_acls("orders", "app")
    user = f"User:{principal}"
    return {str(acl).removeprefix(f"{user} ") for acl in acls if acl.principal == user}


def test_the_client_writes_and_reads_the_action_topic_and_joins_subscription_groups() -> None:
    assert rights("journal-client") == {
        "WRITE TOPIC orders",
        "READ TOPIC orders",
        "DESCRIBE TOPIC orders",
        # the subscription groups (prefixed): join, commit, list, describe; no other group
        "READ GROUP kafka-journal.subscription.*",
        "DESCRIBE GROUP kafka-journal.subscription.*",
    }


def test_the_replicator_reads_the_topic_and_owns_its_group_changelogs_and_quarantine() -> None:
    assert rights("journal-replicator") == {
        "READ TOPIC orders",
        "DESCRIBE TOPIC orders",
        "WRITE TOPIC orders.quarantine",
        "DESCRIBE TOPIC orders.quarantine",
        "READ GROUP app",
        "READ GROUP app-*",  # the apps on grown topics: `app-orders.4`, ...
        *(f"{op} TOPIC app-*" for op in ("CREATE", "READ", "WRITE", "DESCRIBE")),
    }


def test_the_worker_has_exactly_the_union() -> None:
    union = rights("journal-client") | rights("journal-replicator")
    assert rights("journal-worker") == union
    # it serves the groups' HTTP members: the token, not Kafka, says who may join which group
    assert "READ GROUP kafka-journal.subscription.*" in rights("journal-worker")


def test_a_grow_renames_the_literal_acls_of_the_topic_and_its_quarantine_only() -> None:
    topic, group = AclResource.TOPIC, AclResource.GROUP
    read, write = AclOperation.READ, AclOperation.WRITE
    acls = [
        Acl("User:c", topic, "orders", write),
        Acl("User:ops", topic, "orders", read, permission=AclPermission.DENY, host="10.0.0.9"),
        Acl("User:r", topic, "orders.quarantine", write),
        Acl("User:r", topic, "orders", read, AclPattern.PREFIXED),
        Acl("User:r", group, "orders", read),
        Acl("User:r", topic, "orders.other", read),
    ]
    assert [str(acl) for acl in mirrored(acls, "orders", "orders.4")] == [
        "User:c WRITE TOPIC orders.4",
        "User:ops DENY READ TOPIC orders.4 from 10.0.0.9",  # whatever the operator granted
        "User:r WRITE TOPIC orders.4.quarantine",
        "User:r READ TOPIC orders*",  # untouched: not the topic's own
        "User:r READ GROUP orders",
        "User:r READ TOPIC orders.other",
    ]
    # a grown topic grows again: T.4's rights onto T.4.8
    again = mirrored(mirrored(acls[:3], "orders", "orders.4"), "orders.4", "orders.4.8")
    assert [acl.name for acl in again] == ["orders.4.8", "orders.4.8", "orders.4.8.quarantine"]
