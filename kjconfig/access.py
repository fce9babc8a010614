"""Who the project is to Kafka and Cassandra: the one place client options are built.

Contract:
- `KafkaAccess` is how to reach Kafka: the bootstrap servers and, when secured, a SCRAM login
  and optionally TLS (`ClientTls`: the CAs trusted, the name check, a client certificate).
  `client_options()` gives the keyword arguments every aiokafka client of the project takes
  (producer, consumers, admin); `spark_options()` the same for Spark's Kafka source; the Faust
  app builds its credentials from `login` and `ssl_context()`. No module builds these options
  itself, so no client forgets the login or the verification.
- `CassandraLogin` is a role and its password for cassandra-driver's PlainTextAuthProvider.
- Passwords are `SecretStr`s: their repr and str are masked, so a logged settings object or
  an exception that carries one shows `**********`. Only the option builders unwrap them.
- The principals (`KAFKA_USERS`, `CASSANDRA_ROLES`, the admins) and their local-stack dev
  credentials live here, where clients, `stack/` and `app/` read them: the secured stack creates
  these, and its admins (`kafka_admin`, `cassandra_admin`) grant the rights.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from kjconfig.errors import TlsRefused
from kjconfig.hosts import bootstrap_addresses
from kjconfig.settings import SettingsError

KafkaProtocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"]
ScramMechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256"]
Role = Literal["client", "replicator", "worker"]

# Kafka principals (SCRAM users). The admin is the only super user: it creates topics and ACLs.
KAFKA_ADMIN = "journal-admin"
KAFKA_USERS: dict[Role, str] = {
    "client": "journal-client",
    "replicator": "journal-replicator",
    "worker": "journal-worker",
}
# Cassandra roles: reading (clients), writing (replication, the Spark rebuild), schema (admin).
CASSANDRA_ADMIN = "journal_admin"
CASSANDRA_READER = "journal_reader"
CASSANDRA_WRITER = "journal_writer"
CASSANDRA_ROLES: dict[Role, str] = {
    "client": CASSANDRA_READER,
    "replicator": CASSANDRA_WRITER,
    "worker": CASSANDRA_WRITER,
}


def dev_password(user: str) -> SecretStr:
    """The local secured stack's password of `user`. Fixed and public on purpose: the stack
    listens on 127.0.0.1 only, and a fixed value lets a worker, the pipeline and the tests find
    it without reading the stack's directory. Never use it anywhere else: set the
    `KJ_*_PASSWORD` (or `_PASSWORD_FILE`) settings."""
    return SecretStr(f"{user}-dev-only")


@dataclass(frozen=True, slots=True)
class ScramLogin:
    username: str
    password: SecretStr
    mechanism: ScramMechanism = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a client speaks TLS: the CAs it trusts (None: the system's), whether it checks the
    server's name against its certificate (on unless turned off), and its own certificate for
    mutual TLS (`cert`: a PEM chain, which may hold the key too; `key`: the key otherwise)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.key is not None and self.cert is None:
            raise SettingsError("a TLS client key without its certificate")

    def check(self, host: str, port: int, timeout: float = 10.0) -> None:
        """One handshake with `host:port` as the clients make it: `TlsRefused` naming the
        server and the reason when it fails; nothing when it succeeds or the server does not
        answer (that is unavailability, the drivers' to report). Drivers report a failed
        handshake as a lost connection and try again: this says why, once."""
        context = self.context()
        # TLS 1.3 ends the client's handshake before the server checks its certificate (or
        # its absence, where one is required); under 1.2 that refusal comes within the
        # handshake, where this check sees it
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            with (
                socket.create_connection((host, port), timeout) as raw,
                context.wrap_socket(raw, server_hostname=host),
            ):
                return
        except ssl.SSLCertVerificationError as error:
            reason = error.verify_message or error.reason or str(error)
            raise TlsRefused(
                f"TLS to {host}:{port}: its certificate failed verification: {reason}"
                f"{_trusting(self.ca)}"
            ) from None
        except ssl.SSLError as error:
            if "VERSION" in str(error.reason):
                return  # a server of TLS 1.3 only: its drivers' handshake says the rest
            ours = "this client's certificate" if self.cert else "a client without certificate"
            raise TlsRefused(
                f"TLS to {host}:{port} failed: {error.reason or error} (does it speak TLS, "
                f"and does it accept {ours}?)"
            ) from None
        except ConnectionResetError as error:
            # a server that wants a client certificate resets the handshake without one
            raise TlsRefused(
                f"TLS to {host}:{port}: the server reset the handshake: {error}"
            ) from None
        except OSError:
            return

    def check_all(self, addresses: list[tuple[str, int]], timeout: float = 10.0) -> None:
        """`check` each of `addresses` (a bootstrap list, contact points)."""
        for host, port in addresses:
            self.check(host, port, timeout)

    def context(self) -> ssl.SSLContext:
        """A client context that verifies the server (always) and its name (by default)."""
        context = ssl.create_default_context(cafile=None if self.ca is None else str(self.ca))
        context.check_hostname = self.check_hostname
        if self.cert is not None:
            context.load_cert_chain(str(self.cert), None if self.key is None else str(self.key))
        return context


@dataclass(frozen=True, slots=True)
class KafkaAccess:
    """Kafka's servers and how to log in to them (see the module contract)."""

    bootstrap: str
    login: ScramLogin | None = None
    tls: ClientTls | None = None  # SASL_SSL; only with a login (PLAINTEXT and SASL_* are used)

    def __post_init__(self) -> None:
        if self.tls is not None and self.login is None:
            raise SettingsError(
                "TLS without a SASL login (SSL) is not a protocol this project uses"
            )

    @property
    def protocol(self) -> KafkaProtocol:
        if self.login is None:
            return "PLAINTEXT"
        return "SASL_PLAINTEXT" if self.tls is None else "SASL_SSL"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of SASL_SSL, None otherwise."""
        return None if self.tls is None else self.tls.context()

    def check_tls(self, timeout: float = 10.0) -> None:
        """With TLS, a handshake with each bootstrap server (`ClientTls.check`): a certificate
        that fails verification raises `TlsRefused` at once, where aiokafka would only log it
        and retry until its bootstrap gave up."""
        if self.tls is not None:
            self.tls.check_all(bootstrap_addresses(self.bootstrap), timeout)

    def client_options(self) -> dict[str, Any]:
        """aiokafka's keyword arguments: `bootstrap_servers` and the security ones."""
        options: dict[str, Any] = {"bootstrap_servers": self.bootstrap}
        if self.login is not None:
            options |= {
                "security_protocol": self.protocol,
                "sasl_mechanism": self.login.mechanism,
                "sasl_plain_username": self.login.username,
                "sasl_plain_password": self.login.password.get_secret_value(),
            }
            context = self.ssl_context()
            if context is not None:
                options["ssl_context"] = context
        return options

    def spark_options(self) -> dict[str, str]:
        """Spark's Kafka source options (`kafka.`-prefixed consumer configs)."""
        options = {"kafka.bootstrap.servers": self.bootstrap}
        if self.login is not None:
            # JAAS quoting: the password goes between double quotes, so escape those and "\".
            password = self.login.password.get_secret_value()
            quoted = password.replace("\\", "\\\\").replace('"', '\\"')
            options |= {
                "kafka.security.protocol": self.protocol,
                "kafka.sasl.mechanism": self.login.mechanism,
                "kafka.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{self.login.username}" password="{quoted}";'
                ),
            }
            if self.tls is not None:
                options |= _spark_tls(self.tls)
        return options


@dataclass(frozen=True, slots=True)
class CassandraLogin:
    role: str
    password: SecretStr

    def auth_provider(self) -> Any:
        """cassandra-driver's PlainTextAuthProvider for this role."""
        from cassandra.auth import PlainTextAuthProvider

        return PlainTextAuthProvider(self.role, self.password.get_secret_value())


def refuse_plaintext_to_tls(addresses: list[tuple[str, int]], timeout: float = 2.0) -> None:
    """For a plaintext client the server refused: `TlsRefused` when one of `addresses` speaks
    TLS (a handshake, nothing verified: only whether it answers one), which no wait cures."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    for host, port in addresses:
        try:
            with (
                socket.create_connection((host, port), timeout) as raw,
                probe.wrap_socket(raw, server_hostname=host),
            ):
                pass
        except OSError:
            continue  # no TLS there either: the drivers' error stands
        raise TlsRefused(
            f"{host}:{port} speaks TLS only and this client speaks none: set KJ_TLS=true "
            "(with its CA file: docs/operations.md, TLS certificates)"
        )


def _trusting(ca: Path | None) -> str:
    return " (trusting the system's CAs)" if ca is None else f" (trusting the CAs of {ca})"


def _spark_tls(tls: ClientTls) -> dict[str, str]:
    """A Kafka Java client's TLS options (`kafka.`-prefixed): PEM files, as Python's."""
    options = {}
    if tls.ca is not None:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(tls.ca)
    if not tls.check_hostname:
        options["kafka.ssl.endpoint.identification.algorithm"] = ""
    if tls.cert is not None:
        if tls.key is not None:
            # a Java PEM keystore is one file: the key, then the chain
            raise SettingsError(
                "Spark's Kafka client reads its key and certificate from one PEM file: give "
                "both in KJ_KAFKA_SSL_CERTFILE (key first) and leave KJ_KAFKA_SSL_KEYFILE unset"
            )
        options["kafka.ssl.keystore.type"] = "PEM"
        options["kafka.ssl.keystore.location"] = str(tls.cert)
    return options


def kafka_admin(bootstrap: str, tls: ClientTls | None = None) -> KafkaAccess:
    """The local secured stack's Kafka admin (its only super user) at `bootstrap`."""
    return KafkaAccess(bootstrap, ScramLogin(KAFKA_ADMIN, dev_password(KAFKA_ADMIN)), tls)


def cassandra_admin() -> CassandraLogin:
    """The local secured stack's Cassandra admin (a superuser role)."""
    return CassandraLogin(CASSANDRA_ADMIN, dev_password(CASSANDRA_ADMIN))
