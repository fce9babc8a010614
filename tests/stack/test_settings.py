"""StackSettings from KJ_* variables, and external-server mode. No server needed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stack import (
    CassandraCluster,
    CassandraServer,
    ExternalServer,
    KafkaCluster,
    KafkaServer,
    Stack,
    StackError,
    StackSettings,
)
from stack.java import find_java
from stack.progress import no_progress
from stack.settings import KafkaNode

REPO = Path(__file__).resolve().parents[2]


def test_defaults_give_a_local_stack_in_the_repo_with_an_outside_jar_cache() -> None:
    settings = StackSettings.from_env({})
    assert settings.mode == "local"
    assert settings.data_dir == REPO / ".stack"
    assert settings.jar_cache == Path.home() / ".cache" / "kafka-journal" / "jars"
    assert settings.kafka_bootstrap == "127.0.0.1:9092"
    assert settings.kafka_controller_port == 9093
    assert settings.cassandra_hosts == ["127.0.0.1"]
    assert settings.cassandra_port == 9042
    assert settings.cassandra_jmx_port is None
    assert (settings.kafka_heap, settings.cassandra_heap_min, settings.cassandra_heap) == (
        "512m",
        "512m",
        "1g",
    )
    assert settings.cassandra_nodes == 1 and settings.cassandra_heap_max is None
    assert settings.java is None
    assert not settings.kafka_external and not settings.cassandra_external


def test_variables_override_the_defaults(tmp_path: Path) -> None:
    settings = StackSettings.from_env(
        {
            "KJ_STACK_DIR": str(tmp_path / "data"),
            "KJ_JAR_CACHE": str(tmp_path / "jars"),
            "KJ_JAVA": "/opt/jdk17/bin/java",
            "KJ_KAFKA_PORT": "19092",
            "KJ_KAFKA_CONTROLLER_PORT": "19093",
            "KJ_KAFKA_HEAP": "256m",
            "KJ_CASSANDRA_PORT": "19042",
            "KJ_CASSANDRA_STORAGE_PORT": "17001",
            "KJ_CASSANDRA_JMX_PORT": "7199",
            "KJ_CASSANDRA_HEAP_MAX": "2G",
            "KJ_STACK_TIMEOUT": "90",
            "KJ_STACK": "docker",
        }
    )
    assert settings.data_dir == tmp_path / "data"
    assert settings.jar_cache == tmp_path / "jars"
    assert settings.java == "/opt/jdk17/bin/java"
    assert settings.kafka_bootstrap == "127.0.0.1:19092"
    assert settings.kafka_controller_port == 19093
    assert settings.kafka_heap == "256m"
    assert settings.cassandra_port == 19042
    assert settings.cassandra_storage_port == 17001
    assert settings.cassandra_jmx_port == 7199
    assert settings.cassandra_heap_max == "2G"
    assert settings.start_timeout == 90.0
    assert settings.mode == "docker"


def test_xdg_cache_home_moves_the_jar_cache(tmp_path: Path) -> None:
    settings = StackSettings.from_env({"XDG_CACHE_HOME": str(tmp_path)})
    assert settings.jar_cache == tmp_path / "kafka-journal" / "jars"


def test_jmx_port_zero_means_no_jmx() -> None:
    assert StackSettings.from_env({"KJ_CASSANDRA_JMX_PORT": "0"}).cassandra_jmx_port is None


def test_external_servers_come_from_their_variables() -> None:
    settings = StackSettings.from_env(
        {"KJ_KAFKA_BOOTSTRAP": " k1:9092, k2:9093 ", "KJ_CASSANDRA_HOSTS": "c1:9142,c2"}
    )
    assert settings.kafka_external and settings.cassandra_external
    assert settings.kafka_bootstrap == "k1:9092,k2:9093"
    assert settings.cassandra_hosts == ["c1", "c2"]
    assert settings.cassandra_port == 9142


def test_external_cassandra_without_ports_uses_the_cassandra_port() -> None:
    settings = StackSettings.from_env(
        {"KJ_CASSANDRA_HOSTS": "c1,[::1]", "KJ_CASSANDRA_PORT": "9043"}
    )
    assert settings.cassandra_hosts == ["c1", "::1"]
    assert settings.cassandra_port == 9043


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KJ_KAFKA_PORT", "kafka"),
        ("KJ_KAFKA_PORT", "70000"),
        ("KJ_CASSANDRA_STORAGE_PORT", "0"),
        ("KJ_KAFKA_HEAP", "lots"),
        ("KJ_CASSANDRA_HEAP_MIN", "512"),
        ("KJ_STACK", "kubernetes"),
        ("KJ_STACK_TIMEOUT", "0"),
        ("KJ_STACK_TIMEOUT", "soon"),
        ("KJ_KAFKA_BOOTSTRAP", "k1"),
        ("KJ_CASSANDRA_HOSTS", "c1:9042,c2:9043"),
        ("KJ_CASSANDRA_HOSTS", "c1:port"),
    ],
)
def test_a_malformed_variable_is_named_in_the_error(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        StackSettings.from_env({name: value})


def test_a_stack_of_external_servers_starts_and_stops_nothing(tmp_path: Path) -> None:
    settings = StackSettings.from_env(
        {
            "KJ_STACK_DIR": str(tmp_path),
            # Port 1 on loopback: nothing listens there, so both probes fail fast.
            "KJ_KAFKA_BOOTSTRAP": "127.0.0.1:1",
            "KJ_CASSANDRA_HOSTS": "127.0.0.1:1",
        }
    )
    stack = Stack(settings, progress=no_progress)
    assert isinstance(stack.kafka, ExternalServer)
    assert isinstance(stack.cassandra, ExternalServer)
    assert not stack.kafka.controllable and not stack.cassandra.controllable
    assert stack.kafka_bootstrap == "127.0.0.1:1"
    assert (stack.cassandra_hosts, stack.cassandra_port) == (["127.0.0.1"], 1)

    started = time.monotonic()
    with pytest.raises(StackError, match="external"):
        stack.up(timeout=1.0)
    assert time.monotonic() - started < 15
    stack.down()  # leaves external servers alone, raises nothing
    with pytest.raises(StackError):
        stack.kafka.restart()
    assert [status.kind for status in stack.status()] == ["external", "external"]
    assert not any(status.healthy for status in stack.status())
    assert list(tmp_path.iterdir()) == [], "an external stack must write nothing"


def test_a_requested_java_that_does_not_run_is_refused() -> None:
    with pytest.raises(StackError, match="KJ_JAVA"):
        find_java("/nonexistent/bin/java")


def test_the_secured_twin_runs_beside_the_plain_stack(tmp_path: Path) -> None:
    plain = StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path / "s"), "KJ_KAFKA_PORT": "9092"})
    twin = plain.secured_twin()
    assert (twin.security, twin.data_dir) == ("on", tmp_path / "s-secured")
    assert (twin.kafka_port, twin.kafka_controller_port) == (9192, 9193)
    assert (twin.cassandra_port, twin.cassandra_storage_port) == (9142, 17100)
    assert (
        twin.kafka_access.login is not None and twin.kafka_access.login.username == "journal-admin"
    )
    assert plain.kafka_access.login is None and plain.cassandra_login is None


def test_one_broker_is_the_default_and_keeps_its_ports() -> None:
    settings = StackSettings.from_env(
        {"KJ_KAFKA_PORT": "19092", "KJ_KAFKA_CONTROLLER_PORT": "19192"}
    )
    assert settings.kafka_brokers == 1
    assert settings.kafka_nodes == (KafkaNode(1, 19092, 19192, 19102),)
    assert settings.kafka_quorum_voters == "1@127.0.0.1:19192"
    assert settings.kafka_bootstrap == "127.0.0.1:19092"


def test_three_brokers_get_ports_two_apart_and_one_quorum_of_all() -> None:
    settings = StackSettings.from_env(
        {"KJ_KAFKA_BROKERS": "3", "KJ_KAFKA_PORT": "19092", "KJ_KAFKA_CONTROLLER_PORT": "19192"}
    )
    assert settings.kafka_nodes == (
        KafkaNode(1, 19092, 19192, 19102),
        KafkaNode(2, 19094, 19194, 19104),
        KafkaNode(3, 19096, 19196, 19106),
    )
    assert settings.kafka_quorum_voters == ("1@127.0.0.1:19192,2@127.0.0.1:19194,3@127.0.0.1:19196")
    # clients (the worker, the tests) are handed every broker
    assert settings.kafka_bootstrap == "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"
    defaults = StackSettings.from_env({"KJ_KAFKA_BROKERS": "3"})
    assert [(n.port, n.controller_port) for n in defaults.kafka_nodes] == [
        (9092, 9093),
        (9094, 9095),
        (9096, 9097),
    ]


@pytest.mark.parametrize(
    "env",
    [
        {"KJ_KAFKA_BROKERS": "2"},
        {"KJ_KAFKA_BROKERS": "3", "KJ_KAFKA_CONTROLLER_PORT": "9094"},  # 9094, 9096 twice
        {"KJ_KAFKA_BROKERS": "3", "KJ_KAFKA_PORT": "65533"},  # 65535 + 2 is no port
        {"KJ_KAFKA_CONTROLLER_PORT": "9092"},
    ],
)
def test_kafka_node_counts_and_ports_that_cannot_work_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="KJ_KAFKA"):
        StackSettings.from_env(env)


def test_a_three_node_cluster_is_the_stacks_kafka(tmp_path: Path) -> None:
    settings = StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path), "KJ_KAFKA_BROKERS": "3"})
    stack = Stack(settings, progress=no_progress)
    assert isinstance(stack.kafka, KafkaCluster)
    assert [node.home.name for node in stack.kafka.nodes] == ["kafka-1", "kafka-2", "kafka-3"]
    assert stack.kafka_bootstrap == stack.kafka.address == settings.kafka_bootstrap
    properties = stack.kafka.nodes[1].server_properties()
    assert properties["node.id"] == "2"
    assert properties["listeners"] == ("PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095")
    assert properties["controller.quorum.voters"] == settings.kafka_quorum_voters
    assert {
        key: properties[key]
        for key in (
            "default.replication.factor",
            "min.insync.replicas",
            "unclean.leader.election.enable",
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
        )
    } == {
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "false",
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
    }
    one = Stack(StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path)}), progress=no_progress)
    assert isinstance(one.kafka, KafkaServer) and one.kafka.home.name == "kafka"
    assert "default.replication.factor" not in one.kafka.server_properties()
    assert list(tmp_path.iterdir()) == [], "constructing a stack writes nothing"


def test_three_cassandra_nodes_get_their_own_loopback_addresses_and_a_third_of_the_ring(
    tmp_path: Path,
) -> None:
    settings = StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path), "KJ_CASSANDRA_NODES": "3"})
    nodes = settings.cassandra_node_list
    assert [(n.node_id, n.host, n.datacenter) for n in nodes] == [
        (1, "127.0.0.1", "datacenter1"),
        (2, "127.0.0.2", "datacenter1"),
        (3, "127.0.0.3", "datacenter1"),
    ]
    tokens = [n.token for n in nodes]
    assert tokens == sorted(tokens) and tokens[0] > -(2**63) and tokens[-1] < 2**63
    assert settings.cassandra_hosts == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert settings.cassandra_heap == "768m"  # small heaps for three on one machine
    stack = Stack(settings, progress=no_progress)
    assert isinstance(stack.cassandra, CassandraCluster)
    second = stack.cassandra.nodes[1]
    assert second.home.name == "cassandra-2" and second.address == "127.0.0.2:9042"
    yaml = second.cassandra_yaml()
    assert "endpoint_snitch: GossipingPropertyFileSnitch" in yaml
    assert 'seeds: "127.0.0.1:17000,127.0.0.2:17000,127.0.0.3:17000"' in yaml
    assert "listen_address: 127.0.0.2" in yaml and "auto_bootstrap: false" in yaml
    assert list(tmp_path.iterdir()) == [], "constructing a stack writes nothing"
    two = StackSettings.from_env({"KJ_CASSANDRA_NODES": "3", "KJ_CASSANDRA_DATACENTERS": "2"})
    assert [n.datacenter for n in two.cassandra_node_list] == [
        "datacenter1",
        "datacenter2",
        "datacenter1",
    ]


def test_one_cassandra_node_keeps_todays_config(tmp_path: Path) -> None:
    """The default starts as fast as before: a simple snitch, no peers, token 0."""
    one = Stack(StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path)}), progress=no_progress)
    assert isinstance(one.cassandra, CassandraServer) and one.cassandra.home.name == "cassandra"
    yaml = one.cassandra.cassandra_yaml()
    assert "endpoint_snitch: SimpleSnitch" in yaml and "auto_bootstrap" not in yaml
    assert 'seeds: "127.0.0.1:17000"' in yaml


@pytest.mark.parametrize(
    "env",
    [
        {"KJ_CASSANDRA_NODES": "2"},
        {"KJ_CASSANDRA_DATACENTERS": "2"},  # two data centres of one node
        {"KJ_CASSANDRA_NODES": "3", "KJ_STACK_HOST": "localhost"},  # no address + i
    ],
)
def test_cassandra_node_counts_that_cannot_work_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"KJ_CASSANDRA|KJ_STACK_HOST"):
        StackSettings.from_env(env)


def test_the_cassandra_cluster_twin_runs_beside_the_stack(tmp_path: Path) -> None:
    plain = StackSettings.from_env({"KJ_STACK_DIR": str(tmp_path / "s")})
    twin = plain.cassandra_cluster_twin()
    assert (twin.data_dir, twin.cassandra_nodes) == (tmp_path / "s-cassandra3", 3)
    assert (twin.cassandra_port, twin.cassandra_storage_port) == (9242, 17200)
    assert twin.kafka_bootstrap == plain.kafka_bootstrap  # the tests use the stack's Kafka
    with pytest.raises(StackError, match="KJ_SECURITY"):
        Stack(twin.replace(security="on"), progress=no_progress)
