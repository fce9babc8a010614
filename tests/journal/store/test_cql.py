"""Which driver failures `cql.execute` may send again: only those where nothing was sent."""

from __future__ import annotations

import asyncio

import pytest
from cassandra import OperationTimedOut
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionBusy, ConnectionShutdown

from journal.errors import StoreUnavailable
from journal.store.cql import _only_busy, _reject


def test_only_a_busy_connection_on_every_host_is_sent_again() -> None:
    busy = ConnectionBusy("Connection 127.0.0.1:9042 is overloaded")
    assert _only_busy(NoHostAvailable("none", {"a": busy, "b": busy}))
    assert not _only_busy(NoHostAvailable("none", {"a": busy, "b": OperationTimedOut("t")}))
    assert not _only_busy(NoHostAvailable("none", {}))  # no host at all: down, not busy
    assert not _only_busy(OperationTimedOut("sent, perhaps applied"))
    assert not _only_busy(None)


async def test_a_connection_shut_under_a_request_is_the_store_unavailable() -> None:
    """A node killed with requests in flight fails them with `ConnectionShutdown`: a 503 to
    the caller (StoreUnavailable), never a 500 (found by the node-fault test)."""
    future: asyncio.Future[list[object]] = asyncio.get_running_loop().create_future()
    _reject(future, ConnectionShutdown("Connection to 127.0.0.2:9042 was closed"))
    with pytest.raises(StoreUnavailable, match="ConnectionShutdown"):
        await future
