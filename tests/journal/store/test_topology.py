"""The store's production settings without a server: the keyspace's replication as a setting
says it, the consistency and policies a session is built with, and which statements are
marked idempotent (the driver retries and speculates only those)."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import ConsistencyLevel, WriteType
from cassandra.policies import ConstantSpeculativeExecutionPolicy, RetryPolicy
from cassandra.query import SimpleStatement, named_tuple_factory

from journal.settings import Settings
from journal.store.cluster import IdempotentRetryPolicy, execution_profile
from journal.store.statements import Statements, idempotent, unlogged_batch
from journal.store.topology import (
    auto_replication,
    cql_map,
    parse_replication,
    replicas_per_dc,
)


def test_replication_is_auto_per_data_centre_or_as_said() -> None:
    assert parse_replication("auto") == {}
    assert auto_replication({"datacenter1": 1}) == {
        "class": "NetworkTopologyStrategy",
        "datacenter1": "1",
    }
    assert auto_replication({"dc1": 5, "dc2": 2}) == {
        "class": "NetworkTopologyStrategy",
        "dc1": "3",
        "dc2": "2",
    }
    nts = parse_replication(" dc1:3, dc2:3 ")
    assert cql_map(nts) == "{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'dc2': '3'}"
    old = parse_replication("{'class': 'SimpleStrategy', 'replication_factor': 1}")
    # as Cassandra reads it back: what each means on a cluster is compared
    stored = {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "1"}
    assert replicas_per_dc(old, {"dc1": 1}) == replicas_per_dc(stored, {"dc1": 1}) == {"dc1": 1}
    assert replicas_per_dc(old, {"dc1": 3, "dc2": 3}) != replicas_per_dc(nts, {"dc1": 3})
    for bad in ("dc1=3", "dc1:0", "{'replication_factor': 1}", "{nope"):
        with pytest.raises(ValueError):
            parse_replication(bad)


def test_settings_give_the_store_its_production_knobs() -> None:
    default = Settings.from_env({}).cassandra_config()
    assert (default.replication, default.read_consistency, default.write_consistency) == (
        "auto",
        "LOCAL_QUORUM",
        "LOCAL_QUORUM",
    )
    assert (default.local_dc, default.retries, default.speculative_after_ms) == (None, 2, 500)
    config = Settings.from_env(
        {
            "KJ_KEYSPACE_REPLICATION": "dc1:3,dc2:3",
            "KJ_CASSANDRA_READ_CONSISTENCY": "LOCAL_QUORUM",
            "KJ_CASSANDRA_WRITE_CONSISTENCY": "EACH_QUORUM",
            "KJ_CASSANDRA_LOCAL_DC": "dc2",
            "KJ_CASSANDRA_REQUEST_TIMEOUT_S": "4.5",
            "KJ_CASSANDRA_RETRIES": "0",
            "KJ_CASSANDRA_SPECULATIVE_AFTER_MS": "0",
        }
    ).cassandra_config()
    assert (config.write_consistency, config.local_dc, config.request_timeout_s) == (
        "EACH_QUORUM",
        "dc2",
        4.5,
    )
    for variable, value in (
        ("KJ_CASSANDRA_READ_CONSISTENCY", "EACH_QUORUM"),  # not a read's
        ("KJ_CASSANDRA_WRITE_CONSISTENCY", "ANY"),  # acknowledged by a hint: not readable
        ("KJ_KEYSPACE_REPLICATION", "three"),
        ("KJ_CASSANDRA_RETRIES", "-1"),
    ):
        with pytest.raises(ValueError, match=variable):
            Settings.from_env({variable: value})


def test_the_profile_keeps_to_the_local_data_centre_and_speculates() -> None:
    settings = Settings.from_env({"KJ_CASSANDRA_LOCAL_DC": "dc2"})
    profile = execution_profile(settings.cassandra_config(), named_tuple_factory)
    assert profile.load_balancing_policy._child_policy.local_dc == "dc2"
    assert profile.load_balancing_policy._child_policy.used_hosts_per_remote_dc == 0
    assert profile.consistency_level == ConsistencyLevel.LOCAL_QUORUM
    assert profile.request_timeout == 10.0
    speculative = profile.speculative_execution_policy
    assert isinstance(speculative, ConstantSpeculativeExecutionPolicy)
    assert speculative.delay == 0.5
    assert isinstance(profile.retry_policy, IdempotentRetryPolicy)
    off = Settings.from_env({"KJ_CASSANDRA_SPECULATIVE_AFTER_MS": "0"}).cassandra_config()
    no_speculation = execution_profile(off, named_tuple_factory).speculative_execution_policy
    assert not isinstance(no_speculation, ConstantSpeculativeExecutionPolicy)


def test_only_idempotent_requests_are_retried_and_only_so_often() -> None:
    policy = IdempotentRetryPolicy(retries=2)
    write = idempotent("INSERT INTO t (k) VALUES (%s) USING TIMESTAMP %s", None)
    other = SimpleStatement("INSERT INTO t (k) VALUES (%s)")  # not marked: maybe applied
    quorum = ConsistencyLevel.LOCAL_QUORUM
    again, rethrow = RetryPolicy.RETRY_NEXT_HOST, RetryPolicy.RETHROW
    simple = WriteType.SIMPLE
    assert policy.on_write_timeout(write, quorum, simple, 2, 1, 0)[0] == again
    assert policy.on_write_timeout(write, quorum, simple, 2, 1, 2)[0] == rethrow
    assert policy.on_write_timeout(write, quorum, WriteType.CAS, 2, 1, 0)[0] == rethrow
    assert policy.on_write_timeout(other, quorum, simple, 2, 1, 0)[0] == rethrow
    assert policy.on_unavailable(write, quorum, 2, 1, 1)[0] == again
    assert policy.on_read_timeout(write, quorum, 2, 1, False, 0)[0] == again
    assert policy.on_request_error(write, quorum, OSError(), 0)[0] == again
    assert policy.on_request_error(other, quorum, OSError(), 0)[0] == rethrow
    assert unlogged_batch(None).is_idempotent


class _Prepared:
    def __init__(self, query: str) -> None:
        self.query_string = query
        self.is_idempotent = False
        self.consistency_level: int | None = None
        self.fetch_size: int | None = None


class _Session:
    def prepare(self, query: str) -> Any:
        return _Prepared(query)


def test_every_statement_of_the_store_is_idempotent_and_writes_at_the_write_level() -> None:
    each = ConsistencyLevel.EACH_QUORUM
    statements = Statements(_Session(), "ks", each)
    prepared = [v for v in vars(statements).values() if isinstance(v, _Prepared | SimpleStatement)]
    prepared += [
        statements.ids(above, bounded) for above in (False, True) for bounded in (False, True)
    ]
    assert len(prepared) > 20 and all(s.is_idempotent for s in prepared)
    writes = [s for s in prepared if not s.query_string.startswith("SELECT")]
    assert writes and all(s.consistency_level == each for s in writes)
    assert all(s.consistency_level is None for s in prepared if s not in writes)
    assert statements.batch().consistency_level == each
    with pytest.raises(ValueError, match="not idempotent"):
        idempotent("UPDATE t SET n = n + 1 WHERE k = 1", None)  # a counter: never twice
    with pytest.raises(ValueError, match="not idempotent"):
        idempotent("INSERT INTO t (k) VALUES (1) IF NOT EXISTS USING TIMESTAMP 1", None)
