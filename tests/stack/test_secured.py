"""The project against the secured stack: SASL/SCRAM + ACLs on Kafka, roles on Cassandra.

Each test gets a topic, keyspace and Faust app id of its own, created and granted by the
admin as `app/provision.py` says (`grant_journal`); every principal then uses only its own
login (the dev credentials that `KJ_SECURITY=on` selects), never the admin's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from devtools.workers import WorkerProcess
from journal.client.journals import Journals
from journal.core.model import Event, JsonPayload
from journal.errors import KafkaAccessDenied, StoreAccessDenied
from journal.kafka.producer import JournalProducer
from journal.store.cassandra import CassandraStore
from kjconfig.access import (
    CASSANDRA_ADMIN,
    CASSANDRA_ROLES,
    KAFKA_ADMIN,
    KAFKA_USERS,
    dev_password,
)
from stack import Stack
from stack.cli import format_status
from tests.support.harness import replicate_now, unique
from tests.support.http_api import client_session
from tests.support.secured import Granted, granted_journal
from tests.support.workers import wait_replicated
from web.failures import api_error_of

pytestmark = [pytest.mark.integration, pytest.mark.secured, pytest.mark.tls]

_SECRETS = [
    dev_password(user).get_secret_value()
    for user in (KAFKA_ADMIN, CASSANDRA_ADMIN, *KAFKA_USERS.values(), *CASSANDRA_ROLES.values())
]


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def logged() -> Iterator[_Collected]:
    """Every log line of this process (drivers' DEBUG included) while the module runs."""
    handler = _Collected()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
async def granted(secured_stack: Stack, logged: _Collected) -> Granted:
    return await granted_journal(secured_stack)


@pytest.fixture
async def client(granted: Granted) -> AsyncIterator[Journals]:
    journals = await Journals.connect(granted.settings)
    try:
        yield journals
    finally:
        await journals.close()


async def test_the_client_appends_and_reads_and_the_replicator_replicates(
    granted: Granted, client: Journals
) -> None:
    journal = client.journal("order-1")
    await journal.append([Event(1, payload=JsonPayload.of({"placed": 3})), Event(2)])
    assert [r.seq_nr async for r in journal.read()] == [1, 2]

    replicator = granted.as_role("replicator")
    store = await CassandraStore.connect(replicator.cassandra_config())
    try:
        await replicate_now(replicator, store)
    finally:
        await store.close()
    meta = await client.store.meta(journal.key)  # the client's role reads what was written
    assert meta is not None and meta.seq_nr == 2
    assert [r.seq_nr async for r in journal.read()] == [1, 2]


async def test_the_replicator_cannot_write_the_action_topic_and_is_told_which_right(
    granted: Granted,
) -> None:
    replicator = granted.as_role("replicator")
    producer = JournalProducer(replicator.kafka_access())
    await producer.start()
    try:
        with pytest.raises(KafkaAccessDenied) as denied:
            await producer.send_and_wait(replicator.topic, b"{}", key=b"order-1")
    finally:
        await producer.stop()
    message = str(denied.value)
    assert "User:journal-replicator" in message and f"Write on topic {replicator.topic}" in message
    answer = api_error_of(denied.value, retry_after_s=1)  # what the HTTP API makes of it
    assert answer is not None and answer.status == 503
    assert f"Write on topic {replicator.topic}" in answer.message


async def test_a_client_on_a_topic_it_was_not_granted_is_told_which_right_it_lacks(
    granted: Granted,
) -> None:
    other = granted.settings.replace(topic=unique("journal_absent"))
    with pytest.raises(
        KafkaAccessDenied, match=f"User:journal-client Describe on topic {other.topic}"
    ):
        await Journals.connect(other)


async def test_the_client_role_cannot_write_cassandra(granted: Granted) -> None:
    store = await CassandraStore.connect(granted.settings.cassandra_config())
    try:
        with pytest.raises(StoreAccessDenied, match="journal_reader has no MODIFY permission"):
            await store.save_pointer(granted.settings.topic, 0, 1)
    finally:
        await store.close()


async def test_a_worker_appends_and_replicates_as_the_worker_principal(
    granted: Granted, client: Journals, tmp_path: Path
) -> None:
    worker = WorkerProcess(granted.settings, granted.app_id, tmp_path / "worker")
    worker.start()
    try:
        await worker.wait_ready()
        async with client_session(granted.settings) as http:
            body = {"events": [{"seqNr": 1, "payload": {"placed": 3}}]}
            async with http.post(worker.url / "journals/w-1/events", json=body) as response:
                assert response.status == 200, await response.text()
        await wait_replicated(granted.settings, client.store)
        meta = await client.store.meta(client.journal("w-1").key)
        assert meta is not None and meta.seq_nr == 1
    finally:
        worker.stop()
    log = worker.log.read_text(errors="replace")
    assert not [secret for secret in _SECRETS if secret in log]


async def test_a_worker_whose_principal_lacks_write_answers_503_naming_the_right(
    granted: Granted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KJ_KAFKA_USERNAME", "journal-replicator")  # reads, replicates; no Write
    worker = WorkerProcess(granted.settings, granted.app_id, tmp_path / "worker")
    worker.start()
    try:
        await worker.wait_ready()
        async with client_session(granted.settings) as http:
            body = {"events": [{"seqNr": 1, "payload": 1}]}
            async with http.post(worker.url / "journals/w-2/events", json=body) as response:
                text = await response.text()
                assert response.status == 503, text
        assert f"Write on topic {granted.settings.topic}" in text
    finally:
        worker.stop()


def test_no_secret_in_any_log_line_nor_in_stack_status(
    secured_stack: Stack, logged: _Collected
) -> None:
    """Last in the module: every line this process logged, the servers' logs, the status."""
    assert logged.lines, "nothing was logged: the check would prove nothing"
    texts = {"this process's log": "\n".join(logged.lines)}
    texts["stack status"] = "\n".join(format_status(s) for s in secured_stack.status())
    for server in secured_stack.servers:
        for status in [server.status()]:
            if status.log_file is not None and status.log_file.is_file():
                texts[str(status.log_file)] = status.log_file.read_text(errors="replace")
    leaks = [(where, s[:3]) for where, text in texts.items() for s in _SECRETS if s in text]
    assert not leaks, f"secrets found in: {leaks}"
