"""The journal on the local secured stack: what an administrator does before the principals
can run it (`KJ_SECURITY=on`).

`stack/` runs the servers with logins and creates the principals (stack/security.py); this
module, which knows the journal, gives them a journal: the action topic and its quarantine,
the keyspace's schema, the Kafka ACLs of `journal_acls` (aiokafka 0.14's admin has no
create_acls; its protocol module has the CreateAcls request, sent as the admin) and the
Cassandra grants (`journal_reader`: SELECT on the keyspace; `journal_writer`: SELECT and
MODIFY). `stack_up` is `Stack.up` followed by that for the default journal (`KJ_TOPIC`,
`KJ_KEYSPACE`, `KJ_APP_ID`...), as `kafka-journal stack up` leaves it; `grant_journal` does
it for any topic, keyspace and app id (the secured tests' own).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import IntEnum

from app.settings import DEFAULT_APP_ID
from journal.kafka import TopicSpec, ensure_topic, quarantine_topic
from journal.settings import Settings
from journal.store import ensure_schema
from journal.subscriptions import GROUP_PREFIX
from kjconfig.access import (
    CASSANDRA_READER,
    CASSANDRA_WRITER,
    KAFKA_USERS,
    ClientTls,
    KafkaAccess,
    cassandra_admin,
    kafka_admin,
)
from kjconfig.settings import current_environment
from stack import Stack
from stack.security import cassandra_cluster

# --- Kafka ACLs --------------------------------------------------------------------------------


class _Resource(IntEnum):  # Kafka's ResourceType codes
    TOPIC = 2
    GROUP = 3


class _Pattern(IntEnum):  # PatternType
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):  # AclOperation
    READ = 3
    WRITE = 4
    CREATE = 5
    DESCRIBE = 8


_ALLOW = 3


@dataclass(frozen=True, slots=True)
class Acl:
    principal: str  # a SCRAM user name
    resource: _Resource
    name: str
    operation: Operation
    pattern: _Pattern = _Pattern.LITERAL

    def __str__(self) -> str:
        name = f"{self.name}*" if self.pattern is _Pattern.PREFIXED else self.name
        return f"User:{self.principal} {self.operation.name} {self.resource.name} {name}"


def _topic(user: str, name: str, *operations: Operation) -> list[Acl]:
    return [Acl(user, _Resource.TOPIC, name, op) for op in operations]


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
    r, w, c, d = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE
    client, replicator, worker = (KAFKA_USERS[role] for role in ("client", "replicator", "worker"))

    def replicating(user: str) -> list[Acl]:
        return [
            *_topic(user, topic, r, d),
            *_topic(user, quarantine_topic(topic), w, d),
            Acl(user, _Resource.GROUP, app_id, r),
            # the groups of the workers' apps on grown topics (`WorkerSettings.app_id_on`)
            Acl(user, _Resource.GROUP, f"{app_id}-", r, _Pattern.PREFIXED),
            *(
                Acl(user, _Resource.TOPIC, f"{app_id}-", op, _Pattern.PREFIXED)
                for op in (c, r, w, d)
            ),
        ]

    def subscribing(user: str) -> list[Acl]:
        return [Acl(user, _Resource.GROUP, GROUP_PREFIX, op, _Pattern.PREFIXED) for op in (r, d)]

    return [
        *_topic(client, topic, w, r, d),
        *subscribing(client),
        *replicating(replicator),
        *replicating(worker),
        *_topic(worker, topic, w),
        *subscribing(worker),
    ]


async def create_acls(admin: KafkaAccess, acls: list[Acl]) -> None:
    """Create `acls` as the admin (an existing ACL is created again as a no-op)."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.admin import CreateAclsRequest

    # aiokafka 0.14's admin client has no create_acls: the protocol request, sent to any broker
    # with the client's public `send` (the admin client's own way is private)
    client = AIOKafkaClient(**admin.client_options())
    await client.bootstrap()
    try:
        for acl in acls:
            request = CreateAclsRequest(
                acl.resource, acl.name, acl.pattern, f"User:{acl.principal}", "*", acl.operation,
                _ALLOW,
            )  # fmt: skip
            response = await client.send(client.get_random_node(), request)
            for code, message in response.creation_responses:
                if code != 0:
                    raise RuntimeError(f"cannot create ACL {acl}: error {code} {message}")
    finally:
        await client.close()


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
    await ensure_topic(admin, TopicSpec(quarantine_topic(topic.name), 1, topic.replication_factor))
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
