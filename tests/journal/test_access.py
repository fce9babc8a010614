"""Client options from settings: one place builds every Kafka and Cassandra login."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from app.settings import WorkerSettings
from journal.settings import Settings
from kjconfig.access import ClientTls, KafkaAccess, ScramLogin
from kjconfig.settings import SettingsError


def test_security_off_means_plaintext_and_no_logins() -> None:
    settings = Settings.from_env({})
    assert settings.kafka_access() == KafkaAccess("127.0.0.1:9092")
    assert settings.kafka_access().client_options() == {"bootstrap_servers": "127.0.0.1:9092"}
    assert settings.cassandra_config().login is None
    assert settings.cassandra_config().create_schema


@pytest.mark.parametrize(
    ("role", "kafka_user", "cassandra_role"),
    [
        ("client", "journal-client", "journal_reader"),
        ("replicator", "journal-replicator", "journal_writer"),
        ("worker", "journal-worker", "journal_writer"),
    ],
)
def test_security_on_alone_logs_in_as_the_roles_principal_of_the_local_stack(
    role: str, kafka_user: str, cassandra_role: str
) -> None:
    settings = Settings.from_env({"KJ_SECURITY": "on", "KJ_ROLE": role})
    options = settings.kafka_access().client_options()
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert options["sasl_plain_username"] == kafka_user
    assert options["sasl_plain_password"] == f"{kafka_user}-dev-only"
    config = settings.cassandra_config()
    assert config.login is not None and config.login.role == cassandra_role
    assert not config.create_schema  # the admin creates schema


def test_a_worker_is_the_worker_principal_whatever_the_role_variable_says() -> None:
    worker = WorkerSettings.from_env({"KJ_SECURITY": "on", "KJ_ROLE": "client"})
    login = worker.journal.kafka_access().login
    assert login is not None and login.username == "journal-worker"
    assert WorkerSettings().journal.role == "worker"


def test_explicit_credentials_win_and_a_password_file_is_read(tmp_path: Path) -> None:
    secret = tmp_path / "kafka.password"
    secret.write_text("s3cret\n")
    settings = Settings.from_env(
        {
            "KJ_SECURITY": "on",
            "KJ_KAFKA_USERNAME": "orders-service",
            "KJ_KAFKA_PASSWORD_FILE": str(secret),
            "KJ_CASSANDRA_USERNAME": "orders_reader",
            "KJ_CASSANDRA_PASSWORD": "c4ss",
        }
    )
    login = settings.kafka_access().login
    assert login == ScramLogin("orders-service", SecretStr("s3cret"))
    cassandra = settings.cassandra_login()
    assert cassandra is not None and cassandra.role == "orders_reader"
    assert cassandra.password.get_secret_value() == "c4ss"


def test_a_ca_file_makes_it_sasl_ssl(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    settings = Settings.from_env({"KJ_SECURITY": "on", "KJ_KAFKA_SSL_CAFILE": str(ca)})
    access = settings.kafka_access()
    assert access.protocol == "SASL_SSL"
    assert access.spark_options()["kafka.ssl.truststore.location"] == str(ca)
    with pytest.raises(ValueError, match="TLS without a SASL login"):
        KafkaAccess("k:9092", tls=ClientTls())


def test_a_missing_password_file_is_named_when_the_settings_load(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    with pytest.raises(SettingsError, match=f"^KJ_KAFKA_PASSWORD_FILE='{absent}'"):
        Settings.from_env({"KJ_SECURITY": "on", "KJ_KAFKA_PASSWORD_FILE": str(absent)})


def test_secrets_never_show_in_the_settings_repr() -> None:
    settings = Settings.from_env(
        {"KJ_SECURITY": "on", "KJ_KAFKA_PASSWORD": "hunter2", "KJ_CASSANDRA_PASSWORD": "hunter3"}
    )
    shown = f"{settings!r} {settings} {settings.kafka_access()!r} {settings.cassandra_login()!r}"
    assert "hunter2" not in shown and "hunter3" not in shown
    assert "hunter2" not in settings.model_dump_json()


def test_sparks_jaas_line_quotes_the_password() -> None:
    access = KafkaAccess("k:9092", ScramLogin("u", SecretStr('pa"ss\\word')))
    jaas = access.spark_options()["kafka.sasl.jaas.config"]
    assert jaas == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="pa\\"ss\\\\word";'
    )
    assert access.spark_options()["kafka.security.protocol"] == "SASL_PLAINTEXT"


def test_tls_on_makes_kafka_sasl_ssl_and_cassandra_tls_verifying_names(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    settings = Settings.from_env(
        {"KJ_SECURITY": "true", "KJ_TLS": "true", "KJ_CASSANDRA_SSL_CAFILE": str(ca)}
    )
    kafka = settings.kafka_access()
    assert kafka.protocol == "SASL_SSL" and kafka.tls == ClientTls()  # the system's CAs
    assert settings.cassandra_tls() == ClientTls(ca)
    assert settings.cassandra_config().tls == ClientTls(ca)
    assert ClientTls().check_hostname  # on unless turned off
    assert Settings.from_env({"KJ_SECURITY": "true"}).cassandra_tls() is None


def test_tls_needs_the_logins() -> None:
    with pytest.raises(SettingsError, match="KJ_TLS=true needs KJ_SECURITY=true"):
        Settings.from_env({"KJ_TLS": "true"})


def test_sparks_kafka_source_verifies_as_python_does(tmp_path: Path) -> None:
    ca, mine = tmp_path / "ca.pem", tmp_path / "client.pem"
    ca.write_text("-")
    mine.write_text("-")
    settings = Settings.from_env(
        {
            "KJ_SECURITY": "true",
            "KJ_TLS": "true",
            "KJ_KAFKA_SSL_CAFILE": str(ca),
            "KJ_KAFKA_SSL_CERTFILE": str(mine),
            "KJ_SSL_CHECK_HOSTNAME": "false",
        }
    )
    options = settings.kafka_access().spark_options()
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == str(ca)
    assert options["kafka.ssl.keystore.location"] == str(mine)
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""  # names unchecked
    assert (
        "kafka.ssl.endpoint.identification.algorithm"
        not in settings.replace(ssl_check_hostname=True).kafka_access().spark_options()
    )
