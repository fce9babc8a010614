"""The secured stack's rights, as data: what each principal may do, and nothing more."""

from __future__ import annotations

from stack.security import journal_acls, kafka_properties, scram_format_arguments


def rights(principal: str) -> set[str]:
    acls = journal_acls("orders", "app")
    return {
        str(acl).removeprefix(f"User:{principal} ") for acl in acls if acl.principal == principal
    }


def test_the_client_writes_and_reads_the_action_topic_only() -> None:
    assert rights("journal-client") == {
        "WRITE TOPIC orders",
        "READ TOPIC orders",
        "DESCRIBE TOPIC orders",
    }


def test_the_replicator_reads_the_topic_and_owns_its_group_changelogs_and_quarantine() -> None:
    assert rights("journal-replicator") == {
        "READ TOPIC orders",
        "DESCRIBE TOPIC orders",
        "WRITE TOPIC orders.quarantine",
        "DESCRIBE TOPIC orders.quarantine",
        "READ GROUP app",
        *(f"{op} TOPIC app-*" for op in ("CREATE", "READ", "WRITE", "DESCRIBE")),
    }


def test_the_worker_has_exactly_the_union() -> None:
    union = rights("journal-client") | rights("journal-replicator")
    assert rights("journal-worker") == union


def test_only_the_admin_is_super_and_every_user_is_made_at_format_time() -> None:
    properties = kafka_properties("127.0.0.1", 9092, 9093)
    assert properties["super.users"] == "User:journal-admin"
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["listener.security.protocol.map"].count("SASL_PLAINTEXT") == 3
    names = [a.split("name=")[1].split(",")[0] for a in scram_format_arguments() if "name=" in a]
    assert names == ["journal-admin", "journal-client", "journal-replicator", "journal-worker"]
