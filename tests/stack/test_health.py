"""The readiness probes against the real servers, and against ones that do not answer."""

from __future__ import annotations

import re
import socket

import pytest

from stack import Stack
from stack.health import ProbeError, cassandra_release_version, kafka_metadata


@pytest.mark.integration
def test_kafka_answers_with_its_cluster_and_brokers(stack: Stack) -> None:
    metadata = kafka_metadata(stack.kafka_bootstrap)
    assert metadata.cluster_id
    ports = {broker.port for broker in metadata.brokers}
    assert int(stack.kafka_bootstrap.rsplit(":", 1)[1]) in ports
    assert metadata.controller_id in {broker.node_id for broker in metadata.brokers}


@pytest.mark.integration
async def test_kafka_probe_works_inside_a_running_loop(stack: Stack) -> None:
    assert kafka_metadata(stack.kafka_bootstrap).brokers


@pytest.mark.integration
def test_cassandra_answers_with_its_release_version(stack: Stack) -> None:
    version = cassandra_release_version(stack.cassandra_hosts, stack.cassandra_port)
    assert version.split(".")[0].isdigit()


def test_a_port_that_accepts_but_never_answers_is_not_kafka() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(ProbeError, match=re.escape("no answer within 0.5 s")):
            kafka_metadata(f"127.0.0.1:{port}", timeout=0.5)


def test_a_closed_port_is_not_kafka() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(ProbeError, match=re.escape(f"127.0.0.1:{port}")):
            kafka_metadata(f"127.0.0.1:{port}", timeout=2.0)
