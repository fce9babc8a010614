"""The journal on the local secured stack: what an administrator does before the principals
can run it (`KJ_SECURITY=on`).

`stack/` runs the servers with logins and creates the principals (stack/security.py); this
module, which knows the journal, gives them a journal: the action topic and its quarantine,
the keyspace's schema, the Kafka ACLs of `journal_acls` (created as the admin by
journal/kafka/acls.py) and the Cassandra grants (`journal_reader`: SELECT on the keyspace;
`journal_writer`: SELECT and MODIFY). `stack_up` is `Stack.up` followed by that for the
default journal (`KJ_TOPIC`, `KJ_KEYSPACE`, `KJ_APP_ID`...), as `kafka-journal stack up`
leaves it; `grant_journal` does it for any topic, keyspace and app id (the secured tests'
own). The topics a grow creates get their rights from the grow (app/grow.py).
"""

from __future__ import annotations

import asyncio

from app.settings import DEFAULT_APP_ID
from journal.kafka import (
    Acl,
    AclOperation,
    AclPattern,
    AclResource,
    TopicSpec,
    create_acls,
    ensure_topic,
    quarantine_spec,
    quarantine_topic,
)
from journal.settings import Settings
from journal.store import ensure_schema
from journal.subscriptions import GROUP_PREFIX
from kjconfig.access import (
    CASSANDRA_READER,
    CASSANDRA_WRITER,
    KAFKA_USERS,
    ClientTls,
    cassandra_admin,
    kafka_admin,
)
from kjconfig.settings import current_environment
from stack import Stack
from stack.security import cassandra_cluster

# --- Kafka ACLs --------------------------------------------------------------------------------


def _topic(principal: str, name: str, *operations: AclOperation) -> list[Acl]:
    return [Acl(principal, AclResource.TOPIC, name, op) for op in operations]


def journal_acls(topic: str, app_id: str) -> list[Acl]:
    """Every ACL of the three principals for action topic `topic` and Faust app `app_id`.

    - client: Write, Read, Describe on the topic (appends, reads by offset, the tail index and
      high watermarks); Read, Describe on the consumer groups prefixed `GROUP_PREFIX` (the
      subscription groups its members join, list and reset: the command line, `eventsourcing`'s
      tracking group).
    - replicator: Read, Describe on the topic; Write, Describe on its quarantine; Read on the
      consumer group `app_id` and those prefixed `app_id-` (the workers' apps on a grown
      topic, `WorkerSettings.app_id_on`); Create, Read, Write, Describe on topics prefixed
      `app_id-` (the tables' changelogs and Faust's leader topic, which Faust creates itself).
    - worker (it appends, replicates, and serves the subscription groups' HTTP members): the
      union of both.

    The subscription groups' rights are the prefix's, not a group's: over HTTP the worker's
    principal joins every group on its callers' behalf, and which groups a caller may join is
    the worker's check of its token (`journal:subscribe` and its group prefix claim, web.auth).
    The replicator joins none.
    """
    r, w, c, d = AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE
    client, replicator, worker = (
        f"User:{KAFKA_USERS[role]}" for role in ("client", "replicator", "worker")
    )

    def replicating(user: str) -> list[Acl]:
        return [
            *_topic(user, topic, r, d),
            *_topic(user, quarantine_topic(topic), w, d),
            Acl(user, AclResource.GROUP, app_id, r),
            # the groups of the workers' apps on grown topics (`WorkerSettings.app_id_on`)
            Acl(user, AclResource.GROUP, f"{app_id}-", r, AclPattern.PREFIXED),
            *(
                Acl(user, AclResource.TOPIC, f"{app_id}-", op, AclPattern.PREFIXED)
                for op in (c, r, w, d)
            ),
        ]

    def subscribing(user: str) -> list[Acl]:
        return [
            Acl(user, AclResource.GROUP, GROUP_PREFIX, op, AclPattern.PREFIXED) for op in (r, d)
        ]

    return [
        *_topic(client, topic, w, r, d),
        *subscribing(client),
        *replicating(replicator),
        *replicating(worker),
        *_topic(worker, topic, w),
        *subscribing(worker),
    ]


async def grant_keyspace(
    hosts: list[str], port: int, keyspace: str, replication: str, tls: ClientTls | None = None
) -> None:
    """Create the journal schema in `keyspace` as the admin, and grant the roles on it."""
    cluster = cassandra_cluster(hosts, port, cassandra_admin(), tls)
    try:
        session = await asyncio.to_thread(cluster.connect)
        await ensure_schema(session, keyspace, replication)
        for role, permissions in (
            (CASSANDRA_READER, ("SELECT",)),
            (CASSANDRA_WRITER, ("SELECT", "MODIFY")),
        ):
            for permission in permissions:
                await asyncio.to_thread(
                    session.execute, f"GRANT {permission} ON KEYSPACE {keyspace} TO {role}"
                )
    finally:
        await asyncio.to_thread(cluster.shutdown)


# --- both --------------------------------------------------------------------------------------


async def grant_journal(
    bootstrap: str,
    cassandra_hosts: list[str],
    cassandra_port: int,
    topic: TopicSpec,
    keyspace: str,
    replication: str,
    app_id: str,
    tls: ClientTls | None = None,
) -> None:
    """What an administrator does before the principals can run a journal: create the action
    topic, its quarantine and the keyspace's schema, and give the principals their rights."""
    admin = kafka_admin(bootstrap, tls)
    await ensure_topic(admin, topic)
    await ensure_topic(admin, quarantine_spec(topic.name, topic.replication_factor))
    await create_acls(admin, journal_acls(topic.name, app_id))
    await grant_keyspace(cassandra_hosts, cassandra_port, keyspace, replication, tls)


def provision(stack: Stack) -> None:
    """With security on and the stack's own servers: the default journal's topic, schema and
    rights (from the `KJ_*` journal settings: KJ_TOPIC, KJ_KEYSPACE, KJ_APP_ID...); idempotent.
    Nothing otherwise: someone else's servers are granted by their administrator."""
    if stack.settings.security != "on" or not stack.local:
        return
    stack.progress("security on: the journal's topic, schema and rights")
    journal = Settings.from_env()
    app_id = current_environment().get("KJ_APP_ID") or DEFAULT_APP_ID
    s = stack.settings
    asyncio.run(
        grant_journal(
            s.kafka_bootstrap, s.cassandra_hosts, s.cassandra_port, journal.topic_spec(),
            journal.keyspace, journal.keyspace_replication, app_id, s.client_tls,
        )
    )  # fmt: skip


def stack_up(stack: Stack, timeout: float | None = None) -> list[str]:
    """`stack.up(timeout)`, then the default journal provisioned (`provision`); the names of
    the servers started."""
    started = stack.up(timeout)
    provision(stack)
    return started
