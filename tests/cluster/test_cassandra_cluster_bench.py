"""`kafka-journal bench --cassandra-cluster-only` (issue 41) at its smallest: one run measures
both sides, the three-node side on three replicas, every ratio against the one node."""

from __future__ import annotations

import math

import pytest

from bench.cassandra_cluster import CassandraClusterSizes, bench_cassandra_cluster
from stack import Stack
from tests.support.harness import settings_for, unique

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

# the smallest run that takes every path: a backlog, short reads and recoveries, a warm-up
SIZES = CassandraClusterSizes(
    events=100, short_journals=2, short_reads=3, recovery_events=200, recovery_reads=2, warmup=1
)


async def test_one_run_measures_three_nodes_against_one(stack: Stack, three_nodes: Stack) -> None:
    base = settings_for(stack, unique("kj_c3bench"), unique("kj_c3bench"))
    cassandras = {"1 node": stack.settings, "3 nodes": three_nodes.settings}

    section = await bench_cassandra_cluster(base, cassandras, SIZES)

    assert "1 node: the keyspace's replicas datacenter1: 1" in section.notes
    assert "3 nodes: the keyspace's replicas datacenter1: 3" in section.notes  # really RF 3
    rows = {row.name: row for row in section.rows}
    for one_name, three_name in [
        ("replication of 100, 1 node", "replication of 100, 3 nodes"),
        *(
            (f"{read}, 1 node: {q}", f"{read}, 3 nodes: {q}")
            for read in ("read of 100 events", "recovery of 200 events")
            for q in ("p50", "p99")
        ),
    ]:
        one, three = rows[one_name], rows[three_name]
        assert math.isfinite(one.value) and one.value > 0, one
        assert one.baseline is None
        assert three.baseline == one.value, three  # the ratio is against the one node
        assert three.ratio is not None and math.isfinite(three.ratio), three
    assert [len(section.samples[f"read of 100 events, {side}"]) for side in cassandras] == [3, 3]
