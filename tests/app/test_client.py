"""`kafka-journal append|read|pointer|delete|purge` against the real servers."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from stack import Stack
from tests.support.harness import settings_for, unique
from tests.support.workers import REPO

pytestmark = pytest.mark.integration


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=REPO, env=env, capture_output=True, timeout=60
    )


def test_the_client_commands_round_trip(stack: Stack) -> None:
    settings = settings_for(stack, unique("journal_cli"), unique("kj_cli"))
    env = {
        **os.environ,
        "KJ_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "KJ_CASSANDRA_HOSTS": settings.cassandra_hosts,
        "KJ_CASSANDRA_PORT": str(settings.cassandra_port),
        "KJ_KEYSPACE": settings.keyspace,
        "KJ_TOPIC": settings.topic,
    }
    body = '{"events": [{"seqNr": 1, "payload": {"a": 1}}, {"seqNr": 2, "payloadText": "b"}]}'
    appended = cli(env, "append", "order-1", "--data", body)
    assert appended.returncode == 0, appended.stderr
    assert set(orjson.loads(appended.stdout)) == {"partition", "offset", "seqNr"}
    lines = [orjson.loads(line) for line in cli(env, "read", "order-1").stdout.splitlines()]
    assert [(e["seqNr"], e.get("payload"), e.get("payloadText")) for e in lines] == [
        (1, {"a": 1}, None),
        (2, None, "b"),
    ]
    deleted = orjson.loads(cli(env, "delete", "order-1", "--to", "1").stdout)
    assert deleted["deleteTo"] == 1
    pointer = orjson.loads(cli(env, "state", "order-1").stdout)
    assert pointer == {"id": "order-1", "seqNr": 2, "deleteTo": 1}
    assert cli(env, "purge", "order-1").returncode == 0
    assert cli(env, "read", "order-1").stdout == b""
    refused = cli(env, "append", "order-1", "--data", '{"events": [{"seqNr": 0}]}')
    assert refused.returncode == 2 and b"invalid_seq_nr" in refused.stderr
    one = '{"events": [{"seqNr": 1, "payload": "c"}]}'
    conditional = ("--expected-seq-nr", "0", "--idempotency-key", "try-1")
    first = cli(env, "append", "order-1", "--data", one, *conditional)
    assert first.returncode == 0, first.stderr
    retried = cli(env, "append", "order-1", "--data", one, *conditional)
    assert (retried.returncode, retried.stdout) == (0, first.stdout)  # the first answer
    lost = cli(env, "append", "order-1", "--data", one, "--expected-seq-nr", "0")
    assert lost.returncode == 3 and b"seq_nr_conflict" in lost.stderr
    assert orjson.loads(cli(env, "pointer", "order-1").stdout)["seqNr"] == 1  # the old name
    # issue 38 item 6: an append at the end gets a fresh idempotency key, so it is safe to
    # repeat (with --idempotency-key, printed when the outcome is unknown)
    at_end = cli(env, "append", "order-1", "--data", '{"events": [{"payload": "d"}]}')
    assert at_end.returncode == 0, at_end.stderr
    assert orjson.loads(at_end.stdout)["seqNr"] == {"from": 2, "to": 2}
    last = orjson.loads(cli(env, "read", "order-1", "--from", "2").stdout)
    assert len(last["headers"]["journal.idempotency-key"]) == 32, last
