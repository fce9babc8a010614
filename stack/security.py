"""The local stack with security on (`KJ_SECURITY=on`): logins, ACLs, roles and grants.

Kafka: the broker listener speaks SASL_PLAINTEXT with SCRAM-SHA-512; the SCRAM users of
`journal.security` (admin, client, replicator, worker) are written into the metadata log when
the storage is formatted (`--add-scram`), so they exist before the broker first answers. The
controller listener speaks SASL_PLAINTEXT with PLAIN, whose only user (the admin) lives in its
JAAS line: a KRaft controller authenticates its broker before any SCRAM credential is readable.
`StandardAuthorizer` with `journal-admin` as the only super user; everyone else gets exactly
the ACLs of `journal_acls`, created after start by `grant_journal` (aiokafka 0.14's admin has
no create_acls; its protocol module has the CreateAcls request, sent as the admin).

Cassandra: PasswordAuthenticator, CassandraAuthorizer and CassandraRoleManager. On the first
start the default superuser `cassandra` creates `journal_admin` (superuser), which then locks
`cassandra` (no login, no superuser). Roles `journal_reader` (SELECT on the keyspace) and
`journal_writer` (SELECT and MODIFY); the schema is created by the admin (`grant_journal`).

Passwords are the dev ones of `journal.security.dev_password`; they appear only in the
stack's own config files (mode 0600), never in `stack status` or a log line of this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from journal.access import (
    CASSANDRA_ADMIN,
    CASSANDRA_READER,
    CASSANDRA_WRITER,
    DEFAULT_APP_ID,
    KAFKA_ADMIN,
    KAFKA_USERS,
    CassandraLogin,
    KafkaAccess,
    ScramLogin,
    ScramMechanism,
    dev_password,
)
from journal.kafka.topic import TopicSpec, ensure_topic, quarantine_topic
from journal.settings import current_environment
from stack.health import ProbeError, until_answered

SCRAM: ScramMechanism = "SCRAM-SHA-512"
# The journal's schema, which the admin creates in a keyspace (session, keyspace, replication):
# the journal's own (journal/store/schema.py), handed in by what runs the stack, so the stack
# holds no copy of it and needs nothing of the journal's store.
CreateSchema = Callable[[Any, str, str], Awaitable[None]]
# the native protocol the admin speaks: the journal's clients speak v4 too
CASSANDRA_PROTOCOL_VERSION = 4
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def kafka_admin(bootstrap: str) -> KafkaAccess:
    return KafkaAccess(bootstrap, ScramLogin(KAFKA_ADMIN, dev_password(KAFKA_ADMIN), SCRAM))


def cassandra_admin() -> CassandraLogin:
    return CassandraLogin(CASSANDRA_ADMIN, dev_password(CASSANDRA_ADMIN))


def _jaas(module: str, user: str, extra: str = "") -> str:
    password = dev_password(user).get_secret_value()
    return f'{module} required username="{user}" password="{password}"{extra};'


def kafka_properties(host: str, port: int, controller: int) -> dict[str, str]:
    """The broker's listener, SASL and authorizer properties with security on."""
    admin_password = dev_password(KAFKA_ADMIN).get_secret_value()
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return {
        "listeners": f"SASL_PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller}",
        "advertised.listeners": f"SASL_PLAINTEXT://{host}:{port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": SCRAM,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": _jaas(scram, KAFKA_ADMIN),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _jaas(
            plain, KAFKA_ADMIN, f' user_{KAFKA_ADMIN}="{admin_password}"'
        ),
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{KAFKA_ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }


def scram_format_arguments() -> list[str]:
    """`StorageTool format` arguments that create every SCRAM user at format time."""
    arguments = []
    for user in (KAFKA_ADMIN, *KAFKA_USERS.values()):
        password = dev_password(user).get_secret_value()
        arguments += ["--add-scram", f"{SCRAM}=[name={user},password={password}]"]
    return arguments


CASSANDRA_YAML = """\
authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
"""


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
      high watermarks; its consumers are never in a group).
    - replicator: Read, Describe on the topic; Write, Describe on its quarantine; Read on the
      consumer group `app_id`; Create, Read, Write, Describe on topics prefixed `app_id-` (the
      tables' changelogs and Faust's leader topic, which Faust creates itself).
    - worker (it appends and replicates): the union of both.
    """
    r, w, c, d = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE
    client, replicator, worker = (KAFKA_USERS[role] for role in ("client", "replicator", "worker"))

    def replicating(user: str) -> list[Acl]:
        return [
            *_topic(user, topic, r, d),
            *_topic(user, quarantine_topic(topic), w, d),
            Acl(user, _Resource.GROUP, app_id, r),
            *(
                Acl(user, _Resource.TOPIC, f"{app_id}-", op, _Pattern.PREFIXED)
                for op in (c, r, w, d)
            ),
        ]

    return [
        *_topic(client, topic, w, r, d),
        *replicating(replicator),
        *replicating(worker),
        *_topic(worker, topic, w),
    ]


async def create_acls(admin: KafkaAccess, acls: list[Acl]) -> None:
    """Create `acls` as the admin (an existing ACL is created again as a no-op)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.protocol.admin import CreateAclsRequest

    client = AIOKafkaAdminClient(**admin.client_options())
    await client.start()
    try:
        for acl in acls:
            request = CreateAclsRequest(
                acl.resource, acl.name, acl.pattern, f"User:{acl.principal}", "*", acl.operation,
                _ALLOW,
            )  # fmt: skip
            # private: aiokafka 0.14's admin has no create_acls, only the protocol request
            response = await client._send_request(request)
            for code, message in response.creation_responses:
                if code != 0:
                    raise RuntimeError(f"cannot create ACL {acl}: error {code} {message}")
    finally:
        await client.close()


# --- Cassandra roles ---------------------------------------------------------------------------


def _cluster(hosts: list[str], port: int, login: CassandraLogin) -> Any:
    from cassandra.cluster import Cluster

    return Cluster(
        hosts,
        port=port,
        auth_provider=login.auth_provider(),
        protocol_version=CASSANDRA_PROTOCOL_VERSION,
    )


def _refused(error: BaseException) -> bool:
    from cassandra import AuthenticationFailed
    from cassandra.cluster import NoHostAvailable

    return isinstance(error, NoHostAvailable) and all(
        isinstance(e, AuthenticationFailed) for e in error.errors.values()
    )


def ensure_cassandra_roles(hosts: list[str], port: int, within_s: float = 60.0) -> None:
    """Create the admin (from the default superuser, on the first start) and the two roles."""
    admin = cassandra_admin()

    def connect_as_admin() -> Any:
        cluster = _cluster(hosts, port, admin)
        try:
            return cluster, cluster.connect()
        except Exception as error:
            cluster.shutdown()
            if not _refused(error):
                raise
        try:
            _create_admin(hosts, port, admin)
        except Exception as error:
            # the default superuser appears a moment after the node starts: ask again
            if _refused(error):
                raise ProbeError("Cassandra's default superuser is not there yet") from error
            raise
        cluster = _cluster(hosts, port, admin)
        return cluster, cluster.connect()

    cluster, session = until_answered(connect_as_admin, within_s)
    try:
        session.execute("ALTER ROLE cassandra WITH SUPERUSER = false AND LOGIN = false")
        for role in (CASSANDRA_READER, CASSANDRA_WRITER):
            session.execute(
                f"CREATE ROLE IF NOT EXISTS {role} WITH LOGIN = true AND PASSWORD = %s",
                (dev_password(role).get_secret_value(),),
            )
    finally:
        cluster.shutdown()


def _create_admin(hosts: list[str], port: int, admin: CassandraLogin) -> None:
    from pydantic import SecretStr

    default = CassandraLogin("cassandra", SecretStr("cassandra"))  # Cassandra's own default
    cluster = _cluster(hosts, port, default)
    try:
        session = cluster.connect()
        session.execute(
            f"CREATE ROLE IF NOT EXISTS {admin.role} "
            "WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = %s",
            (admin.password.get_secret_value(),),
        )
    finally:
        cluster.shutdown()


async def grant_keyspace(
    hosts: list[str], port: int, keyspace: str, replication: str, create_schema: CreateSchema
) -> None:
    """Create the journal schema in `keyspace` as the admin, and grant the roles on it."""
    cluster = _cluster(hosts, port, cassandra_admin())
    try:
        session = await asyncio.to_thread(cluster.connect)
        await create_schema(session, keyspace, replication)
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
    create_schema: CreateSchema,
) -> None:
    """What an administrator does before the principals can run a journal: create the action
    topic, its quarantine and the keyspace's schema, and give the principals their rights."""
    admin = kafka_admin(bootstrap)
    await ensure_topic(admin, topic)
    await ensure_topic(admin, TopicSpec(quarantine_topic(topic.name), 1, topic.replication_factor))
    await create_acls(admin, journal_acls(topic.name, app_id))
    await grant_keyspace(cassandra_hosts, cassandra_port, keyspace, replication, create_schema)


def provision(
    kafka_bootstrap: str, hosts: list[str], port: int, create_schema: CreateSchema
) -> None:
    """Roles, then the default journal's topic, schema and rights (from the `KJ_*` journal
    settings: KJ_TOPIC, KJ_KEYSPACE, KJ_APP_ID...), as `kafka-journal stack up` leaves them."""
    from journal.settings import Settings

    journal = Settings.from_env()
    ensure_cassandra_roles(hosts, port)
    app_id = current_environment().get("KJ_APP_ID") or DEFAULT_APP_ID
    asyncio.run(
        grant_journal(
            kafka_bootstrap, hosts, port, journal.topic_spec(), journal.keyspace,
            journal.keyspace_replication, app_id, create_schema,
        )
    )  # fmt: skip
