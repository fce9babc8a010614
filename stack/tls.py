"""The local stack with TLS (`KJ_TLS=true`, with `KJ_SECURITY=true`): its certificates.

Contract: `ensure_certificates(directory)` makes, once, a local certificate authority
(`ca.pem`, its key `ca-key.pem`) and one server certificate signed by it (`server.pem`: the
PKCS#8 key, then the certificate), named for 127.0.0.1, ::1 and localhost (the names clients
verify). Kafka (PEM keystore and truststore) and Cassandra (PEMBasedSslContextFactory) read
these files; every client of the stack trusts `ca.pem` alone. An existing set is kept while it
has more than `RENEW_BEFORE` left, so a restart keeps the certificates clients already trust.

`issue` and `new_ca` make other certificates with the same library (the tests' wrong CA,
expired and client certificates): never by hand, never with openssl on the command line.
Keys are files of mode 0600 in the stack's directory, which is its owner's.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# the names every local server answers to: its clients connect to 127.0.0.1 (or localhost)
SERVER_NAMES = ("localhost", "127.0.0.1", "::1")
CA_DAYS = 3650
SERVER_DAYS = 825  # what browsers and most TLS stacks accept for a leaf
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class Issued:
    """A key and its certificate, in memory."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    def key_pem(self) -> bytes:
        # PKCS#8 unencrypted: what Kafka's PEM keystore and Cassandra's PEM factory read
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class StackCertificates:
    """Where the local stack's TLS files are."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca-key.pem"

    @property
    def server(self) -> Path:
        """The server's PKCS#8 key followed by its certificate (a PEM keystore)."""
        return self.directory / "server.pem"


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafka-journal local stack"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_ca(common_name: str = "kafka-journal local CA", days: int = CA_DAYS) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    now = _now()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, certificate)


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(
    ca: Issued,
    common_name: str,
    names: tuple[str, ...] = SERVER_NAMES,
    *,
    usage: Literal["server", "client", "both"] = "server",
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
) -> Issued:
    """A certificate signed by `ca` for `names` (DNS names or IP addresses): a server's, a
    client's (for mutual TLS), or both (a worker's: it serves HTTPS and, forwarding, is a
    client of the others). The validity defaults to now .. SERVER_DAYS."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    usages = {
        "server": [ExtendedKeyUsageOID.SERVER_AUTH],
        "client": [ExtendedKeyUsageOID.CLIENT_AUTH],
        "both": [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    }[usage]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - dt.timedelta(minutes=5))
        .not_valid_after(not_after or now + dt.timedelta(days=SERVER_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), False
        )
    )
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_alt_name(n) for n in names]), critical=False
        )
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def write_private(path: Path, data: bytes) -> None:
    """`data` into `path`, readable by its owner only (it holds a key)."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)


def _load_ca(files: StackCertificates) -> Issued:
    key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{files.ca_key} is not the stack CA's EC key")
    return Issued(key, x509.load_pem_x509_certificate(files.ca.read_bytes()))


def _fresh(path: Path) -> bool:
    """Whether `path`'s (last) certificate is there and valid for RENEW_BEFORE more."""
    if not path.is_file():
        return False
    certificates = x509.load_pem_x509_certificates(path.read_bytes())
    return bool(certificates) and certificates[-1].not_valid_after_utc - _now() > RENEW_BEFORE


def ensure_certificates(directory: Path) -> StackCertificates:
    """The stack's CA and server certificate in `directory`, made when missing or near their
    end (module contract). A new CA means every client must trust its new `ca.pem`."""
    files = StackCertificates(directory)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    if _fresh(files.ca) and files.ca_key.is_file():
        ca = _load_ca(files)
    else:
        ca = new_ca()
        write_private(files.ca_key, ca.key_pem())
        files.ca.write_bytes(ca.certificate_pem())
    if not _fresh(files.server) or not _signed_by(files.server, ca):
        # both: a worker on the local stack may serve with it and present it when forwarding
        server = issue(ca, "kafka-journal local server", usage="both")
        write_private(files.server, server.key_pem() + server.certificate_pem())
    return files


def _signed_by(path: Path, ca: Issued) -> bool:
    certificate = x509.load_pem_x509_certificates(path.read_bytes())[-1]
    try:
        certificate.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


__all__ = ["Issued", "StackCertificates", "ensure_certificates", "issue", "new_ca"]
