"""The secured stack's servers, as data: one super user, every principal made at format time."""

from __future__ import annotations

from stack.security import kafka_properties, scram_format_arguments


def test_only_the_admin_is_super_and_every_user_is_made_at_format_time() -> None:
    properties = kafka_properties("127.0.0.1", 9092, 9093)
    assert properties["super.users"] == "User:journal-admin"
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["listener.security.protocol.map"].count("SASL_PLAINTEXT") == 3
    names = [a.split("name=")[1].split(",")[0] for a in scram_format_arguments() if "name=" in a]
    assert names == ["journal-admin", "journal-client", "journal-replicator", "journal-worker"]
