"""The local stack with security on (`KJ_SECURITY=on`): the servers' logins and roles.

Kafka: the broker listener speaks SASL_PLAINTEXT with SCRAM-SHA-512; the SCRAM users of
`kjconfig.access` (admin, client, replicator, worker) are written into the metadata log when
the storage is formatted (`--add-scram`), so they exist before the broker first answers. The
controller listener speaks SASL_PLAINTEXT with PLAIN, whose only user (the admin) lives in its
JAAS line: a KRaft controller authenticates its broker before any SCRAM credential is readable.
`StandardAuthorizer` with `journal-admin` as the only super user; everyone else gets only the
ACLs an administrator creates (for the journal: app/provision.py, after `stack up`).

Cassandra: PasswordAuthenticator, CassandraAuthorizer and CassandraRoleManager. On the first
start the default superuser `cassandra` creates `journal_admin` (superuser), which then locks
`cassandra` (no login, no superuser), and creates the roles `journal_reader` and
`journal_writer`; their grants and the schema are the journal's (app/provision.py).

Passwords are the dev ones of `kjconfig.access.dev_password`; they appear only in the
stack's own config files (mode 0600), never in `stack status` or a log line of this module.
"""

from __future__ import annotations

from typing import Any

from kjconfig.access import (
    CASSANDRA_READER,
    CASSANDRA_WRITER,
    KAFKA_ADMIN,
    KAFKA_USERS,
    CassandraLogin,
    ClientTls,
    ScramMechanism,
    cassandra_admin,
    dev_password,
)
from stack.health import ProbeError, until_answered
from stack.tls import StackCertificates

SCRAM: ScramMechanism = "SCRAM-SHA-512"
# the native protocol the admin speaks: the journal's clients speak v4 too
CASSANDRA_PROTOCOL_VERSION = 4
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _jaas(module: str, user: str, extra: str = "") -> str:
    password = dev_password(user).get_secret_value()
    return f'{module} required username="{user}" password="{password}"{extra};'


def kafka_properties(
    host: str,
    port: int,
    controller: int,
    tls: StackCertificates | None = None,
    mtls_port: int | None = None,
) -> dict[str, str]:
    """The broker's listener, SASL and authorizer properties with security on; with `tls`
    every listener (the controller's too) speaks SASL_SSL with the stack's certificate, and
    `mtls_port` is a second SASL_SSL listener (MTLS) that requires a client certificate."""
    admin_password = dev_password(KAFKA_ADMIN).get_secret_value()
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    protocol = "SASL_PLAINTEXT" if tls is None else "SASL_SSL"
    name = protocol.lower()
    mtls = tls is not None and mtls_port is not None
    listeners = f"{protocol}://{host}:{port}" + (f",MTLS://{host}:{mtls_port}" if mtls else "")
    return (
        {
            "listeners": f"{listeners},CONTROLLER://{host}:{controller}",
            "advertised.listeners": listeners,
            "listener.security.protocol.map": f"{protocol}:{protocol},CONTROLLER:{protocol}"
            + (",MTLS:SASL_SSL" if mtls else ""),
            "inter.broker.listener.name": protocol,
            "sasl.enabled.mechanisms": SCRAM,
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            f"listener.name.{name}.sasl.enabled.mechanisms": SCRAM,
            f"listener.name.{name}.scram-sha-512.sasl.jaas.config": _jaas(scram, KAFKA_ADMIN),
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": _jaas(
                plain, KAFKA_ADMIN, f' user_{KAFKA_ADMIN}="{admin_password}"'
            ),
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{KAFKA_ADMIN}",
            "allow.everyone.if.no.acl.found": "false",
        }
        | ({} if tls is None else _kafka_tls(tls))
        | (_kafka_mtls() if mtls else {})
    )


def _kafka_mtls() -> dict[str, str]:
    """The MTLS listener: SCRAM as on the other, and a client certificate required. Only a
    listener-prefixed ssl.client.auth applies to a SASL_SSL listener (KIP-684): the plain
    `ssl.client.auth` is ignored there, so the main listener asks for no certificate."""
    return {
        "listener.name.mtls.sasl.enabled.mechanisms": SCRAM,
        "listener.name.mtls.scram-sha-512.sasl.jaas.config": _jaas(
            "org.apache.kafka.common.security.scram.ScramLoginModule", KAFKA_ADMIN
        ),
        "listener.name.mtls.ssl.client.auth": "required",
    }


def _kafka_tls(tls: StackCertificates) -> dict[str, str]:
    """PEM keystore (the key, then the certificate) and truststore (the stack's CA): the
    broker's server side, and its client side to the other nodes (names verified)."""
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
        # not in force on a SASL_SSL listener (KIP-684: only a listener-prefixed one is):
        # mutual TLS is the MTLS listener's (_kafka_mtls)
        "ssl.client.auth": "requested",
        "ssl.endpoint.identification.algorithm": "https",
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


def cassandra_tls_yaml(tls: StackCertificates) -> str:
    """Client encryption, required (no plaintext port): Cassandra 5's PEM context factory reads
    the key and certificate from one file, the CA from another. Nodes talk in clear: they talk
    over the loopback only, and `KJ_CASSANDRA_NODES=3` is refused with security on."""
    return f"""\
client_encryption_options:
  enabled: true
  optional: false
  require_client_auth: false
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: {tls.server}
  truststore: {tls.ca}
"""


# --- Cassandra roles ---------------------------------------------------------------------------


def cassandra_cluster(
    hosts: list[str], port: int, login: CassandraLogin, tls: ClientTls | None = None
) -> Any:
    """A cassandra-driver Cluster (not connected) logging in as `login` (over `tls`)."""
    from cassandra.cluster import Cluster

    return Cluster(
        hosts,
        port=port,
        auth_provider=login.auth_provider(),
        protocol_version=CASSANDRA_PROTOCOL_VERSION,
        ssl_context=None if tls is None else tls.context(),
    )


def _refused(error: BaseException) -> bool:
    from cassandra import AuthenticationFailed
    from cassandra.cluster import NoHostAvailable

    return isinstance(error, NoHostAvailable) and all(
        isinstance(e, AuthenticationFailed) for e in error.errors.values()
    )


def ensure_cassandra_roles(
    hosts: list[str], port: int, tls: ClientTls | None = None, within_s: float = 60.0
) -> None:
    """Create the admin (from the default superuser, on the first start) and the two roles."""
    admin = cassandra_admin()

    def connect_as_admin() -> Any:
        cluster = cassandra_cluster(hosts, port, admin, tls)
        try:
            return cluster, cluster.connect()
        except Exception as error:
            cluster.shutdown()
            if not _refused(error):
                raise
        try:
            _create_admin(hosts, port, admin, tls)
        except Exception as error:
            # the default superuser appears a moment after the node starts: ask again
            if _refused(error):
                raise ProbeError("Cassandra's default superuser is not there yet") from error
            raise
        cluster = cassandra_cluster(hosts, port, admin, tls)
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


def _create_admin(
    hosts: list[str], port: int, admin: CassandraLogin, tls: ClientTls | None
) -> None:
    from pydantic import SecretStr

    default = CassandraLogin("cassandra", SecretStr("cassandra"))  # Cassandra's own default
    cluster = cassandra_cluster(hosts, port, default, tls)
    try:
        session = cluster.connect()
        session.execute(
            f"CREATE ROLE IF NOT EXISTS {admin.role} "
            "WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = %s",
            (admin.password.get_secret_value(),),
        )
    finally:
        cluster.shutdown()
