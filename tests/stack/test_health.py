"""The readiness probes against the real servers, and against ones that do not answer."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import pytest

from kjconfig.access import KafkaAccess
from stack import Stack
from stack.health import (
    ProbeError,
    cassandra_release_version,
    kafka_metadata,
    kafka_quorum,
    until_answered,
)


@pytest.mark.integration
def test_kafka_answers_with_its_cluster_and_brokers(stack: Stack) -> None:
    metadata = kafka_metadata(stack.settings.kafka_access)
    assert metadata.cluster_id
    ports = {broker.port for broker in metadata.brokers}
    assert int(stack.kafka_bootstrap.rsplit(":", 1)[1]) in ports
    assert metadata.controller_id in {broker.node_id for broker in metadata.brokers}


@pytest.mark.integration
async def test_kafka_probe_works_inside_a_running_loop(stack: Stack) -> None:
    assert kafka_metadata(stack.settings.kafka_access).brokers


@pytest.mark.integration
def test_kafka_answers_with_its_metadata_quorum(stack: Stack) -> None:
    """DescribeQuorum, which aiokafka does not offer, through a client's public `send`."""
    quorum = kafka_quorum(stack.settings.kafka_access)
    assert quorum.voters
    assert quorum.leader_id in quorum.voters


@pytest.mark.integration
def test_cassandra_answers_with_its_release_version(stack: Stack) -> None:
    version = cassandra_release_version(stack.cassandra_hosts, stack.cassandra_port)
    assert version is not None and version.split(".")[0].isdigit()


def test_a_port_that_accepts_but_never_answers_is_not_kafka() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(ProbeError, match=re.escape("no answer within 0.5 s")):
            kafka_metadata(KafkaAccess(f"127.0.0.1:{port}"), timeout=0.5)


def test_a_closed_port_is_not_kafka() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(ProbeError, match=re.escape(f"127.0.0.1:{port}")):
            kafka_metadata(KafkaAccess(f"127.0.0.1:{port}"), timeout=2.0)


def test_until_answered_retries_only_probe_errors() -> None:
    answers: Iterator[ProbeError | str] = iter([ProbeError("boot"), ProbeError("boot"), "5.0.9"])

    def probe() -> str:
        answer = next(answers)
        if isinstance(answer, ProbeError):
            raise answer
        return answer

    assert until_answered(probe, within_s=30.0, max_pause_s=0.01) == "5.0.9"

    calls: list[int] = []

    def buggy() -> str:
        calls.append(1)
        raise KeyError("a bug is not 'not ready yet'")

    with pytest.raises(KeyError):
        until_answered(buggy, within_s=30.0, max_pause_s=0.01)
    assert len(calls) == 1


def test_until_answered_gives_up_with_the_last_error_or_when_told() -> None:
    attempts: list[int] = []

    def never() -> str:
        attempts.append(1)
        raise ProbeError(f"attempt {len(attempts)}")

    with pytest.raises(ProbeError, match=r"attempt \d+"):
        # long enough for several attempts, however slow this machine is to schedule them
        until_answered(never, within_s=1.0, max_pause_s=0.01)
    assert len(attempts) > 1

    def died() -> None:
        raise RuntimeError("the JVM exited")

    attempts.clear()
    with pytest.raises(RuntimeError, match="exited"):
        until_answered(never, within_s=30.0, between=died, max_pause_s=0.01)
    assert len(attempts) == 1
