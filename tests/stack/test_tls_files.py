"""The TLS stack's files and configs (stack/tls.py), without servers."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from app.settings import WorkerSettings
from kjconfig.settings import SettingsError
from stack.security import cassandra_tls_yaml, kafka_properties
from stack.settings import StackSettings
from stack.tls import ensure_certificates


def test_the_stack_makes_a_ca_and_a_server_certificate_once(tmp_path: Path) -> None:
    files = ensure_certificates(tmp_path / "tls")
    server = x509.load_pem_x509_certificates(files.server.read_bytes())[-1]
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    server.verify_directly_issued_by(x509.load_pem_x509_certificate(files.ca.read_bytes()))
    assert files.server.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8
    for secret in (files.server, files.ca_key):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    before = files.ca.read_bytes(), files.server.read_bytes()
    ensure_certificates(tmp_path / "tls")  # a restart keeps what clients already trust
    assert (files.ca.read_bytes(), files.server.read_bytes()) == before


def test_tls_turns_every_kafka_listener_to_sasl_ssl_and_cassandra_to_tls_only(
    tmp_path: Path,
) -> None:
    files = ensure_certificates(tmp_path)
    properties = kafka_properties("127.0.0.1", 9092, 9093, files)
    assert properties["listeners"] == "SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert properties["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL"
    assert "PLAINTEXT" not in properties["listener.security.protocol.map"].replace("SASL_", "")
    assert properties["ssl.keystore.type"] == properties["ssl.truststore.type"] == "PEM"
    mtls = kafka_properties("127.0.0.1", 9092, 9093, files, mtls_port=9102)
    assert mtls["advertised.listeners"] == "SASL_SSL://127.0.0.1:9092,MTLS://127.0.0.1:9102"
    assert mtls["listener.security.protocol.map"].endswith(",MTLS:SASL_SSL")
    # only the listener-prefixed setting applies to a SASL_SSL listener (KIP-684)
    assert mtls["listener.name.mtls.ssl.client.auth"] == "required"
    yaml = cassandra_tls_yaml(files)
    assert "enabled: true" in yaml and "optional: false" in yaml


def test_tls_needs_security() -> None:
    with pytest.raises(SettingsError, match="KJ_TLS=true needs KJ_SECURITY=true"):
        StackSettings.from_env({"KJ_TLS": "true"})
    secured = StackSettings.from_env({"KJ_TLS": "true", "KJ_SECURITY": "true"})
    assert secured.client_tls is not None and secured.client_tls.ca == secured.tls_ca
    assert secured.kafka_access.protocol == "SASL_SSL"


def test_a_worker_with_a_certificate_serves_https_and_may_require_clients_ones(
    tmp_path: Path,
) -> None:
    files = ensure_certificates(tmp_path)
    plain = WorkerSettings.from_env({})
    assert plain.url.startswith("http://") and plain.server_ssl_context() is None
    https = WorkerSettings.from_env({"KJ_HTTP_SSL_CERTFILE": str(files.server)})
    assert https.url == "https://127.0.0.1:6066"
    context = https.server_ssl_context()
    assert context is not None and context.verify_mode == ssl.CERT_NONE
    mutual = https.replace(http_ssl_client_cafile=files.ca)
    context = mutual.server_ssl_context()
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    assert mutual.forwarding_tls().cert == files.server  # presented when forwarding
    with pytest.raises(SettingsError, match="need KJ_HTTP_SSL_CERTFILE"):
        WorkerSettings.from_env({"KJ_HTTP_SSL_CLIENT_CAFILE": str(files.ca)})
