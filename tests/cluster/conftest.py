"""The three-node Cassandra the store's fault tests share (one start per session: ~30-40 s)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from stack import Stack

_WAIT_FOR_OTHER_SESSIONS = 200.0  # as tests/conftest.py's


@pytest.fixture(scope="session")
def three_nodes(stack: Stack) -> Iterator[Stack]:
    """The stack's Kafka and a three-node Cassandra beside the stack's own (started unless up):
    `StackSettings.cassandra_cluster_twin`, 127.0.0.1-3 on the stack's ports + 200, its own data
    dir, so that killing a node never stops the Cassandra other sessions share."""
    twin = Stack(stack.settings.cassandra_cluster_twin(), tie_to_parent=True)
    started = time.monotonic()
    twin.up()
    print(f"three Cassandra nodes up in {time.monotonic() - started:.1f} s")
    try:
        yield twin
    finally:
        twin.down(only_started=True, wait_for_others=_WAIT_FOR_OTHER_SESSIONS)
