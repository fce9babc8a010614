"""The project on the stack with TLS (KJ_SECURITY=true KJ_TLS=true): Kafka's listeners speak
SASL_SSL only, Cassandra's native port TLS only, both with the stack's certificate
(stack/tls.py). Every client verifies it: the journal's semantic suite passes through the
direct client; a plaintext client and a client trusting another CA are refused by Kafka and
Cassandra, and a server certificate that expired by the clients, each with the error a user
sees; Kafka's listener that requires client certificates serves a client with a valid one and
refuses one without or with an expired one; an eventsourcing application saves and reads
back; a capture of the loopback during appends shows neither the payload nor a password.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import random
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal
from uuid import UUID

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from app.cli import main
from app.http_tokens import client_headers
from eventsourcing_kafka_journal.tables import ensure_tables
from journal.client.journals import Journals
from journal.core.model import Ack, Event, JsonPayload
from journal.errors import KafkaUnavailable, StoreUnavailable, TlsRefused
from journal.kafka.producer import JournalProducer
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from kjconfig.access import (
    CASSANDRA_ROLES,
    CASSANDRA_WRITER,
    KAFKA_USERS,
    ClientTls,
    cassandra_admin,
    dev_password,
)
from stack import Stack
from stack.tls import Issued, StackCertificates, issue, new_ca, write_private
from tests.journal.journal_contract import JournalContract
from tests.journal.test_journals import Direct
from tests.support.capture import loopback_capture
from tests.support.harness import Harness, unique
from tests.support.http_api import HttpJournals, client_session
from tests.support.http_model import Client, Tally
from tests.support.secured import Granted, granted_journal
from tests.support.workers import (
    WorkerProcess,
    metric,
    running_workers,
    suite_over,
    wait_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.tls]

OPERATIONS = 400  # sent in the HTTP model check over TLS: every kind of operation, many times


@pytest.fixture(scope="module")
async def granted(tls_stack: Stack) -> Granted:
    return await granted_journal(tls_stack)


async def _harness(granted: Granted) -> Harness:
    """The client principal's journals; the replicator's store and quarantine producer."""
    replicator = granted.as_role("replicator")
    store = await CassandraStore.connect(replicator.cassandra_config())
    journals = await Journals.connect(granted.settings)
    producer = JournalProducer(replicator.kafka_access())
    await producer.start()
    return Harness(journals, store, producer, granted.settings)


async def _close(harness: Harness) -> None:
    await harness.producer.stop()
    await harness.journals.close()
    await harness.store.close()


class TestDirectOverTls(JournalContract):
    @pytest.fixture(scope="class")
    @classmethod
    async def api(cls, granted: Granted, replicating: bool) -> AsyncIterator[Direct]:
        harness = await _harness(granted)
        try:
            yield Direct(harness, replicating)
        finally:
            await _close(harness)


# --- refusals ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA file of another authority than the stack's."""
    path = tmp_path_factory.mktemp("other-ca") / "ca.pem"
    path.write_bytes(new_ca("not the stack's CA").certificate_pem())
    return path


def _stack_ca(stack: Stack) -> Issued:
    """The stack's CA (stack/tls.py), to issue the tests' certificates with."""
    files = StackCertificates(stack.settings.tls_dir)
    key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return Issued(key, x509.load_pem_x509_certificate(files.ca.read_bytes()))


async def _kafka_refusal(settings: Settings) -> BaseException:
    with pytest.raises((TlsRefused, KafkaUnavailable)) as refused:
        journals = await asyncio.wait_for(Journals.connect(settings), 60)
        await journals.close()
    return refused.value


async def _cassandra_refusal(settings: Settings) -> BaseException:
    with pytest.raises((TlsRefused, StoreUnavailable)) as refused:
        store = await asyncio.wait_for(CassandraStore.connect(settings.cassandra_config()), 60)
        await store.close()
    return refused.value


async def test_a_plaintext_client_is_refused_by_kafka_and_cassandra(granted: Granted) -> None:
    plain = granted.settings.replace(tls="off", kafka_ssl_cafile=None, cassandra_ssl_cafile=None)
    assert plain.kafka_access().protocol == "SASL_PLAINTEXT" and plain.cassandra_tls() is None
    # each server closes a connection that does not start with a TLS handshake; the client
    # then finds that it speaks TLS, and says so (no retry cures it)
    for error, port in (
        (await _kafka_refusal(plain), granted.settings.kafka_bootstrap.rpartition(":")[2]),
        (await _cassandra_refusal(plain), str(granted.settings.cassandra_port)),
    ):
        assert isinstance(error, TlsRefused), error
        assert str(error).startswith(f"127.0.0.1:{port} speaks TLS only and this client speaks")
        assert "set KJ_TLS=true" in str(error)


async def test_a_client_trusting_another_ca_refuses_kafka_and_cassandra(
    granted: Granted, other_ca: Path
) -> None:
    settings = granted.settings.replace(kafka_ssl_cafile=other_ca, cassandra_ssl_cafile=other_ca)
    kafka = await _kafka_refusal(settings)
    cassandra = await _cassandra_refusal(settings)
    for error, port in ((kafka, settings.kafka_bootstrap), (cassandra, settings.cassandra_port)):
        assert isinstance(error, TlsRefused), error
        assert f"127.0.0.1:{str(port).rpartition(':')[2]}" in str(error)
        assert "unable to get local issuer certificate" in str(error)
        assert str(other_ca) in str(error)


async def test_the_client_refuses_a_server_certificate_that_expired(
    tls_stack: Stack, tmp_path: Path
) -> None:
    """The other side of an expiry: a server whose certificate (of the stack's CA, for
    127.0.0.1) expired is refused by the clients' check, before any driver retries."""
    ca = _stack_ca(tls_stack)
    now = dt.datetime.now(dt.UTC)
    a_month_ago, yesterday = now - dt.timedelta(days=30), now - dt.timedelta(days=1)
    expired = issue(ca, "expired server", not_before=a_month_ago, not_after=yesterday)
    pem = tmp_path / "server.pem"
    write_private(pem, expired.key_pem() + expired.certificate_pem())
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(pem)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    async def serve() -> None:
        connection, _ = await asyncio.to_thread(listener.accept)
        with connection, contextlib.suppress(OSError):
            server_context.wrap_socket(connection, server_side=True).close()

    serving = asyncio.ensure_future(serve())
    try:
        with pytest.raises(TlsRefused, match=f"127.0.0.1:{port}.*certificate has expired"):
            await asyncio.to_thread(ClientTls(tls_stack.settings.tls_ca).check, "127.0.0.1", port)
    finally:
        await asyncio.wait_for(serving, 10)
        listener.close()


# --- Kafka's mutual TLS (its MTLS listener, ssl.client.auth=required) ------------------------


@pytest.fixture(scope="module")
def client_certificates(tls_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`valid.pem` and `expired.pem`: client certificates (key + certificate) of the stack's CA."""
    directory = tmp_path_factory.mktemp("kafka-clients")
    ca = _stack_ca(tls_stack)
    now = dt.datetime.now(dt.UTC)
    valid = issue(ca, "kafka client", (), usage="client")
    expired = issue(
        ca,
        "expired kafka client",
        (),
        usage="client",
        not_before=now - dt.timedelta(days=30),
        not_after=now - dt.timedelta(days=1),
    )
    for name, issued in (("valid", valid), ("expired", expired)):
        write_private(directory / f"{name}.pem", issued.key_pem() + issued.certificate_pem())
    return directory


def _mtls(granted: Granted, tls_stack: Stack, cert: Path | None) -> Settings:
    """The client's settings on Kafka's listener that requires a client certificate."""
    return granted.settings.replace(
        kafka_bootstrap=tls_stack.settings.kafka_mtls_bootstrap, kafka_ssl_certfile=cert
    )


async def test_kafka_requiring_client_certificates_serves_a_client_with_a_valid_one(
    granted: Granted, tls_stack: Stack, client_certificates: Path
) -> None:
    settings = _mtls(granted, tls_stack, client_certificates / "valid.pem")
    journals = await asyncio.wait_for(Journals.connect(settings), 60)
    try:
        journal = journals.journal("mtls")
        payload = JsonPayload.of({"over": "mtls"})
        await journal.append([Event(1, frozenset(), payload)], ack=Ack.VERIFIED)
        assert [e.event.payload async for e in journal.read()] == [payload]
    finally:
        await journals.close()


async def test_kafka_requiring_client_certificates_refuses_none_and_an_expired_one(
    granted: Granted, tls_stack: Stack, client_certificates: Path
) -> None:
    """Without a certificate, or with an expired one, the handshake fails, said at once
    (TlsRefused naming the listener), not retried by aiokafka until its bootstrap gives up."""
    address = tls_stack.settings.kafka_mtls_bootstrap
    without = await _kafka_refusal(_mtls(granted, tls_stack, None))
    expired = await _kafka_refusal(_mtls(granted, tls_stack, client_certificates / "expired.pem"))
    assert isinstance(without, TlsRefused), without
    assert str(without).startswith(f"TLS to {address} failed: SSLV3_ALERT_BAD_CERTIFICATE")
    assert "accept a client without certificate?" in str(without)
    assert isinstance(expired, TlsRefused), expired
    # Kafka's JSSE answers an expired certificate with certificate_unknown
    assert str(expired).startswith(f"TLS to {address} failed: SSLV3_ALERT_CERTIFICATE_UNKNOWN")
    assert "accept this client's certificate?" in str(expired)


# --- the eventsourcing module ------------------------------------------------------------------


class Account(Aggregate):
    @event("Opened")
    def __init__(self, owner: str) -> None:
        self.owner = owner


class Accounts(Application[UUID]):
    def open(self, owner: str) -> UUID:
        account = Account(owner)
        self.save(account)
        return account.id


async def test_an_eventsourcing_application_saves_and_reads_back_over_tls(
    tls_stack: Stack,
) -> None:
    """An application of the eventsourcing library, given the TLS settings as any application
    is (its environment), saves an aggregate and a second instance reads it back: Kafka over
    SASL_SSL and Cassandra over TLS, each verified against the stack's CA."""
    # one partition: an application's topic is its notification order
    settings = (await granted_journal(tls_stack, partitions=1)).settings
    # its notification index is Cassandra tables of its own: an administrator makes them on a
    # secured stack (create_schema is off for the principals), then it writes them as a writer
    admin = await CassandraStore.connect(
        dataclasses.replace(
            settings.cassandra_config(), login=cassandra_admin(), create_schema=True
        )
    )
    try:
        await ensure_tables(admin.keyspace_access)
    finally:
        await admin.close()
    assert settings.kafka_ssl_cafile is not None and settings.cassandra_ssl_cafile is not None
    env = {
        "PERSISTENCE_MODULE": "eventsourcing_kafka_journal",
        "KJ_SECURITY": "true",
        "KJ_TLS": "true",
        "KJ_KAFKA_SSL_CAFILE": str(settings.kafka_ssl_cafile),
        "KJ_CASSANDRA_SSL_CAFILE": str(settings.cassandra_ssl_cafile),
        "KJ_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "KJ_CASSANDRA_HOSTS": settings.cassandra_hosts,
        "KJ_CASSANDRA_PORT": str(settings.cassandra_port),
        "KJ_CASSANDRA_USERNAME": CASSANDRA_WRITER,
        "KJ_TOPIC": settings.topic,
        "KJ_KEYSPACE": settings.keyspace,
    }

    def save_and_read_back() -> tuple[str, int]:
        writer = Accounts(env=env)
        try:
            account_id = writer.open("alice")
        finally:
            writer.close()
        reader = Accounts(env=env)
        try:
            account: Account = reader.repository.get(account_id)
            notifications = reader.notification_log.select(start=1, limit=10)
            assert isinstance(account, Account)
            return account.owner, len(notifications)
        finally:
            reader.close()

    assert await asyncio.to_thread(save_and_read_back) == ("alice", 1)


# --- on the wire -------------------------------------------------------------------------------


async def test_the_loopback_carries_no_payload_nor_password_in_clear(
    granted: Granted, tls_stack: Stack
) -> None:
    kafka_port = tls_stack.settings.kafka_port
    cassandra_port = tls_stack.settings.cassandra_port
    marker = "clear-text-marker-4c1f9e"
    secrets = [
        dev_password(user).get_secret_value()
        for user in (*KAFKA_USERS.values(), *CASSANDRA_ROLES.values())
    ]
    control = socket.socket()
    control.bind(("127.0.0.1", 0))
    control.listen(1)
    control_port = control.getsockname()[1]
    with loopback_capture({kafka_port, cassandra_port, control_port}) as capture:
        # a positive control: the capture does see bytes sent in clear on the loopback
        with socket.create_connection(("127.0.0.1", control_port)) as sender:
            sender.sendall(marker.encode())
        control.accept()[0].close()
        harness = await _harness(granted)  # the logins happen in here
        try:
            journal = harness.journals.journal("wire")
            for n in range(1, 4):
                payload = JsonPayload.of({"secret": marker, "n": n})
                await journal.append([Event(n, frozenset(), payload)], ack=Ack.VERIFIED)
            await harness.replicate()  # the payload's way into Cassandra
            assert [e.event.seq_nr async for e in journal.read()] == [1, 2, 3]
        finally:
            await _close(harness)
    control.close()
    assert marker.encode() in capture.seen(control_port)
    for port in (kafka_port, cassandra_port):
        wire = capture.seen(port)
        assert len(wire) > 1000, f"nothing captured on {port}"
        assert marker.encode() not in wire
        for secret in secrets:
            assert secret.encode() not in wire
        assert b"journal-client" not in wire  # not even a user name


# --- the HTTP API over HTTPS, two workers ------------------------------------------------------


def _https_env(stack: Stack, worker_cert: Path) -> dict[str, str]:
    """A worker on the TLS stack: its clients trust the stack's CA; it serves HTTPS with a
    certificate of that CA named for 127.0.0.1, and requires its clients' certificates (mutual
    TLS): the other worker, forwarding, presents its own."""
    ca = str(stack.settings.tls_ca)
    return {
        "KJ_TLS": "true",
        "KJ_KAFKA_SSL_CAFILE": ca,
        "KJ_CASSANDRA_SSL_CAFILE": ca,
        "KJ_HTTP_SSL_CERTFILE": str(worker_cert),
        "KJ_HTTP_SSL_CAFILE": ca,
        "KJ_HTTP_SSL_CLIENT_CAFILE": ca,
    }


def _certificate(
    stack: Stack, directory: Path, usage: Literal["server", "client", "both"], expired: bool
) -> Path:
    """A certificate of the stack's CA (key, then certificate), for 127.0.0.1 and localhost."""
    now = dt.datetime.now(dt.UTC)
    start, end = (
        (now - dt.timedelta(days=30), now - dt.timedelta(days=1)) if expired else (None, None)
    )
    issued = issue(_stack_ca(stack), f"test {usage}", usage=usage, not_before=start, not_after=end)
    path = directory / f"{usage}{'-expired' if expired else ''}.pem"
    write_private(path, issued.key_pem() + issued.certificate_pem())
    return path


@pytest.fixture(scope="module")
def certificates(tls_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("certificates")


@pytest.fixture(scope="module")
async def http_granted(tls_stack: Stack) -> Granted:
    return await granted_journal(tls_stack, partitions=4)


@pytest.fixture(scope="module")
async def http_client(http_granted: Granted) -> AsyncIterator[Journals]:
    async with await Journals.connect(http_granted.settings) as journals:
        yield journals


@pytest.fixture(scope="module")
def workers(
    http_granted: Granted,
    tls_stack: Stack,
    tmp_path_factory: pytest.TempPathFactory,
    certificates: Path,
) -> Iterator[list[WorkerProcess]]:
    env = _https_env(tls_stack, _certificate(tls_stack, certificates, "both", expired=False))
    with running_workers(
        http_granted.settings, tmp_path_factory, app_id=http_granted.app_id, env=env
    ) as both:
        yield both


@pytest.fixture(scope="module")
async def http_api(
    http_granted: Granted, http_client: Journals, workers: list[WorkerProcess]
) -> AsyncIterator[HttpJournals]:
    await wait_settled(workers)  # both hold partitions: half the requests are forwarded
    async with suite_over(HttpJournals, workers, http_granted.settings, http_client.store) as api:
        yield api


class TestTwoWorkersOverHttps(JournalContract):
    """Each request goes to the other worker than the last: half are forwarded, over HTTPS."""

    @pytest.fixture
    def api(self, http_api: HttpJournals) -> HttpJournals:
        return http_api


async def test_the_workers_serve_https_only(
    http_api: HttpJournals, workers: list[WorkerProcess], other_ca: Path
) -> None:
    assert all(str(worker.url).startswith("https://127.0.0.1:") for worker in workers)
    port = workers[0].port
    # a plaintext client: the worker closes a connection that does not begin with TLS
    async with aiohttp.ClientSession() as plain:
        with pytest.raises(aiohttp.ClientError) as refused:
            await plain.get(f"http://127.0.0.1:{port}/readyz")
    assert isinstance(refused.value, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)
    # a client trusting another CA: aiohttp names the host and the reason
    wrong = aiohttp.TCPConnector(ssl=ClientTls(other_ca).context())
    async with aiohttp.ClientSession(connector=wrong) as session:
        with pytest.raises(aiohttp.ClientConnectorCertificateError) as untrusted:
            await session.get(f"https://127.0.0.1:{port}/readyz")
    assert f"127.0.0.1:{port}" in str(untrusted.value)
    # the worker sends its CA with its certificate (OpenSSL builds the chain from the client
    # CAs it loaded), so the reason is the chain's self-signed root, not a missing issuer
    assert "certificate verify failed: self-signed certificate in certificate chain" in str(
        untrusted.value
    )


async def test_the_http_model_check_passes_through_two_workers_over_https(
    http_api: HttpJournals,
    workers: list[WorkerProcess],
    http_granted: Granted,
    tls_stack: Stack,
    certificates: Path,
) -> None:
    """Issue 45: the per-journal HTTP model (tests/support/http_model.py) through both HTTPS
    workers with mutual TLS: verified and at-end appends, deletes, reads, snapshots, each
    request to either worker; every answer 200 (or a snapshot's 404) and exact."""
    client = _certificate(tls_stack, certificates, "client", expired=False)
    tls = ClientTls(tls_stack.settings.tls_ca, client)
    tally = Tally()
    connector = aiohttp.TCPConnector(ssl=tls.context())
    async with client_session(http_granted.settings, connector=connector) as session:
        urls = [worker.url for worker in workers]
        clients = [
            Client(session, urls, tally, random.Random(n), unique("tlsmodel")) for n in range(4)
        ]
        async with asyncio.timeout(300), asyncio.TaskGroup() as group:
            for c in clients:
                group.create_task(c.run(asyncio.Event(), OPERATIONS // len(clients)))
        for c in clients:  # every journal reads back exact from either worker
            for url in urls:
                c.urls = [url]
                await c.read()
    assert not tally.wrong, tally.wrong[:5]
    kinds = {kind for kind, count in tally.answers.items() if count and kind.endswith(" 200")}
    assert kinds == {"POST 200", "GET 200", "DELETE 200", "PUT 200"}, tally.answers
    assert all(c.last > 0 for c in clients)  # every journal took appends


async def test_the_workers_require_a_valid_client_certificate(
    http_api: HttpJournals, workers: list[WorkerProcess], tls_stack: Stack, certificates: Path
) -> None:
    url = f"{workers[0].url}/readyz"
    ca = tls_stack.settings.tls_ca

    async def status(tls: ClientTls) -> int:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls.context())) as session,
            session.get(url) as response,
        ):
            return response.status

    client = _certificate(tls_stack, certificates, "client", expired=False)
    assert await status(ClientTls(ca, client)) == 200  # the control: a valid one is served
    expired = _certificate(tls_stack, certificates, "client", expired=True)
    for refused in (ClientTls(ca), ClientTls(ca, expired)):  # none, and an expired one
        with pytest.raises(aiohttp.ClientError) as error:
            await status(refused)
        # TLS 1.3: the worker's alert arrives after the client's handshake, on the first read
        assert isinstance(error.value, aiohttp.ClientOSError | aiohttp.ServerDisconnectedError)


async def test_the_loopback_carries_no_token_nor_payload_to_the_workers(
    http_api: HttpJournals, workers: list[WorkerProcess], http_granted: Granted
) -> None:
    marker = "https-clear-text-marker-7d2b"
    token = client_headers(http_granted.settings)["Authorization"].removeprefix("Bearer ")
    assert token
    ports = {worker.port for worker in workers}

    async def forwarded() -> float:
        return sum([await metric(w, "kafka_journal_forwarded_requests_total") for w in workers])

    before = await forwarded()
    with loopback_capture(ports) as capture:
        for k in range(4):  # spread over the partitions: some forwarded worker to worker
            batch = [Event(1, frozenset(), JsonPayload.of({"secret": marker, "k": k}))]
            await http_api.append(f"https-wire-{k}", batch)
            assert [e.seq_nr for e in await http_api.read(f"https-wire-{k}")] == [1]
    assert await forwarded() > before  # worker to worker too, over HTTPS
    for port in ports:
        wire = capture.seen(port)
        assert len(wire) > 1000, f"nothing captured on {port}"
        assert marker.encode() not in wire and token.encode() not in wire
        assert b"Authorization" not in wire and b"POST /journals" not in wire


async def test_a_worker_trusting_another_ca_refuses_to_start_and_says_why(
    granted: Granted, tmp_path: Path, other_ca: Path
) -> None:
    worker = WorkerProcess(
        granted.settings,
        granted.app_id,
        tmp_path / "worker",
        env={"KJ_KAFKA_SSL_CAFILE": str(other_ca)},
    )
    worker.start()
    assert worker.process is not None
    code = await asyncio.to_thread(worker.process.wait, 120)  # no retry loop: it exits
    assert code == 1
    assert (
        "the worker refuses to start: TLS to 127.0.0.1:"
        f"{granted.settings.kafka_bootstrap.rpartition(':')[2]}: its certificate failed "
        "verification: unable to get local issuer certificate"
    ) in worker.log.read_text()


def test_the_command_line_says_why_tls_failed_without_a_trace(
    granted: Granted,
    tls_stack: Stack,
    other_ca: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    s = granted.settings
    for variable, value in {
        "KJ_KAFKA_BOOTSTRAP": s.kafka_bootstrap,
        "KJ_CASSANDRA_HOSTS": s.cassandra_hosts,
        "KJ_CASSANDRA_PORT": str(s.cassandra_port),
        "KJ_TOPIC": s.topic,
        "KJ_KEYSPACE": s.keyspace,
        "KJ_SECURITY": "true",
        "KJ_TLS": "true",
        "KJ_KAFKA_SSL_CAFILE": str(tls_stack.settings.tls_ca),
        "KJ_CASSANDRA_SSL_CAFILE": str(other_ca),
    }.items():
        monkeypatch.setenv(variable, value)
    assert main(["state", "cli-1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kafka-journal: TLS to 127.0.0.1:{s.cassandra_port}: its certificate")
    assert "Traceback" not in err
