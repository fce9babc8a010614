"""One Cassandra node of three killed -9: replication, the store's reads and the journal's
appends and reads go on at once, with no `StoreUnavailable` (invariant 1, and the store's
half of invariant 5: LOCAL_QUORUM needs 2 of the 3 replicas the automatic replication gives).

The three nodes are a Cassandra of their own (`StackSettings.cassandra_cluster_twin`: 127.0.0.1-3
on the stack's ports + 200, its own data dir), never the test stack's, which other sessions
share; Kafka is the test stack's. Each step reads the store directly (`Harness.stored`), since a
journal's read would fall back to Kafka and hide a store that fails.
"""

from __future__ import annotations

import pytest

from journal.core.model import Event, JsonPayload
from journal.store.cql import execute
from stack import CassandraCluster, Stack
from tests.support.harness import Harness, harness, unique
from tests.support.raw_store import session_of

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

JOURNALS = 6  # over the 3 partitions of the harness's topic


async def _append_and_check(h: Harness, ids: list[str], expected: dict[str, int]) -> None:
    """Append one event to each journal, replicate, and read every journal from the store and
    through the client: all of each, in order."""
    for journal_id in ids:
        n = expected[journal_id] + 1
        await h.journals.journal(journal_id).append([Event(n, payload=JsonPayload.of({"n": n}))])
        expected[journal_id] = n
    await h.replicate()
    for journal_id in ids:
        everything = list(range(1, expected[journal_id] + 1))
        meta, stored = await h.stored(journal_id)  # the store itself: raises if unavailable
        assert meta is not None and stored == everything, journal_id
        read = [r.seq_nr async for r in h.journals.journal(journal_id).read()]
        assert read == everything, journal_id


async def test_one_node_killed_stops_neither_replication_nor_reads(three_nodes: Stack) -> None:
    cassandra = three_nodes.cassandra
    assert isinstance(cassandra, CassandraCluster)
    async with harness(three_nodes, unique("kj_c3"), "journal_c3") as h:
        rows = await execute(
            session_of(h.store),
            "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
            (h.settings.keyspace,),
        )
        assert dict(rows[0].replication)["datacenter1"] == "3"  # the automatic replication
        ids = [unique("c3") for _ in range(JOURNALS)]
        expected = dict.fromkeys(ids, 0)
        await _append_and_check(h, ids, expected)

        victim = cassandra.nodes[1]
        victim.kill9()
        try:
            # at once, before gossip has convicted it: then again, with it known down
            for _ in range(3):
                await _append_and_check(h, ids, expected)
        finally:
            victim.start()
        await _append_and_check(h, ids, expected)
        assert cassandra.healthy()
