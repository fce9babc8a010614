"""The stack's servers and one keyspace for the module's tests, as an application would be
given them: through the environment."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from stack import Stack
from tests.support.harness import unique

KEYSPACE = unique("es")


@pytest.fixture(scope="module")
def stack_environment(stack: Stack) -> Iterator[None]:
    """The stack's servers and the module's keyspace, as an application would be given them."""
    variables = {
        "PERSISTENCE_MODULE": "eventsourcing_kafka_journal",
        "KJ_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "KJ_CASSANDRA_HOSTS": ",".join(stack.cassandra_hosts),
        "KJ_CASSANDRA_PORT": str(stack.cassandra_port),
        "KJ_KEYSPACE": KEYSPACE,
    }
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
