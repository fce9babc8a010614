"""Which driver failures `cql.execute` may send again: only those where nothing was sent."""

from __future__ import annotations

from cassandra import OperationTimedOut
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionBusy

from journal.store.cql import _only_busy


def test_only_a_busy_connection_on_every_host_is_sent_again() -> None:
    busy = ConnectionBusy("Connection 127.0.0.1:9042 is overloaded")
    assert _only_busy(NoHostAvailable("none", {"a": busy, "b": busy}))
    assert not _only_busy(NoHostAvailable("none", {"a": busy, "b": OperationTimedOut("t")}))
    assert not _only_busy(NoHostAvailable("none", {}))  # no host at all: down, not busy
    assert not _only_busy(OperationTimedOut("sent, perhaps applied"))
    assert not _only_busy(None)
