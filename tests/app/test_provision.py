"""The journal's rights on the secured stack, as data: what each principal may do, and
nothing more."""

from __future__ import annotations

from app.provision import journal_acls


def rights(principal: str) -> set[str]:
    acls = journal_acls("orders", "app")
    return {
        str(acl).removeprefix(f"User:{principal} ") for acl in acls if acl.principal == principal
    }


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
