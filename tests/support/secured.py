"""A journal on the secured stack, created and granted by the admin (app/provision.py)."""

from __future__ import annotations

from dataclasses import dataclass

from app.provision import grant_journal
from journal.settings import Settings
from kjconfig.access import Role
from stack import Stack
from tests.support.harness import unique


@dataclass(frozen=True)
class Granted:
    settings: Settings  # the client principal's
    app_id: str  # the Faust app (consumer group, changelogs) the ACLs name

    def as_role(self, role: Role) -> Settings:
        return self.settings.replace(role=role)


async def granted_journal(stack: Stack, partitions: int = 2) -> Granted:
    """A fresh topic, keyspace and app id, with every principal's rights on them."""
    s = stack.settings
    tls = s.tls == "on"
    settings = Settings(
        security="on",
        tls=s.tls,
        kafka_ssl_cafile=s.tls_ca if tls else None,
        cassandra_ssl_cafile=s.tls_ca if tls else None,
        kafka_bootstrap=s.kafka_bootstrap,
        cassandra_hosts=",".join(s.cassandra_hosts),
        cassandra_port=s.cassandra_port,
        topic=unique("journal_sec"),
        keyspace=unique("sec"),
        partitions=partitions,
        segment_size=50,
    )
    app_id = unique("kafka-journal-sec")
    await grant_journal(
        s.kafka_bootstrap,
        s.cassandra_hosts,
        s.cassandra_port,
        settings.topic_spec(),
        settings.keyspace,
        settings.keyspace_replication,
        app_id,
        s.client_tls,
    )
    return Granted(settings, app_id)
