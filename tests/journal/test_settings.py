"""The one settings loader: defaults, KJ_* variables, flags; bad values name their source."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import WorkerSettings
from journal.settings import Settings
from kjconfig.settings import SettingsError
from stack.settings import StackSettings


def test_variables_override_defaults_and_flags_override_variables() -> None:
    env = {"KJ_TOPIC": "orders", "KJ_CASSANDRA_PORT": "9043", "KJ_KEYSPACE": "from_env"}
    settings = Settings.from_env(env, keyspace="from_flag", segment_size=None)
    assert (settings.topic, settings.cassandra_port) == ("orders", 9043)
    assert settings.keyspace == "from_flag"
    assert settings.segment_size == 100_000  # None: the flag was not given
    assert settings.topic_spec().name == "orders"
    assert settings.cassandra_config().port == 9043


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"KJ_CASSANDRA_PORT": "ninety"}, "KJ_CASSANDRA_PORT='ninety'"),
        ({"KJ_PARTITIONS": "0"}, "KJ_PARTITIONS='0'"),
        ({"KJ_WEB_PORT": "70000"}, "KJ_WEB_PORT='70000'"),
        ({"KJ_READ_WAIT_S": "soon"}, "KJ_READ_WAIT_S='soon'"),
    ],
)
def test_a_bad_variable_is_named(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError) as raised:
        WorkerSettings.from_env(env)
    assert str(raised.value).startswith(named), raised.value


def test_cassandra_hosts_may_name_their_port_as_a_stacks_external_ones_do() -> None:
    env = {"KJ_CASSANDRA_HOSTS": " c1:9142, c2 ", "KJ_CASSANDRA_PORT": "9043"}
    settings = Settings.from_env(env)
    assert settings.cassandra_host_list == ("c1", "c2")
    assert settings.cassandra_port == 9142
    assert settings.cassandra_config().port == 9142
    assert settings.replace(keyspace="other").cassandra_port == 9142
    stack = StackSettings.from_env(env)  # one parser: the same list means the same servers
    assert (stack.cassandra_hosts, stack.cassandra_port) == (["c1", "c2"], 9142)
    plain = Settings.from_env({"KJ_CASSANDRA_HOSTS": "c1,[::1]", "KJ_CASSANDRA_PORT": "9043"})
    assert (plain.cassandra_host_list, plain.cassandra_port) == (("c1", "::1"), 9043)


@pytest.mark.parametrize("hosts", ["c1:9042,c2:9043", "c1:port", ":9042"])
def test_a_bad_cassandra_host_list_is_named(hosts: str) -> None:
    with pytest.raises(SettingsError, match=r"^KJ_CASSANDRA_HOSTS="):
        Settings.from_env({"KJ_CASSANDRA_HOSTS": hosts})


def test_a_worker_bound_to_every_interface_needs_the_url_it_is_reached_at() -> None:
    with pytest.raises(SettingsError, match="KJ_HTTP_URL"):
        WorkerSettings.from_env({"KJ_WEB_HOST": "0.0.0.0"})
    env = {"KJ_WEB_HOST": "0.0.0.0", "KJ_WEB_URL": "http://worker:6066"}
    assert WorkerSettings.from_env(env).url == "http://worker:6066"


def test_a_bad_flag_is_named_as_a_flag() -> None:
    with pytest.raises(SettingsError, match=r"^--http-port='x'"):
        WorkerSettings.from_env({"KJ_WEB_PORT": "7000"}, web_port="x")


def test_each_setting_has_one_variable_and_one_flag() -> None:
    names = [
        (model.variable_of(n), model.flag_of(n)) for model, n, _ in WorkerSettings.settings_fields()
    ]
    assert ("KJ_KAFKA_BOOTSTRAP", "--kafka-bootstrap") in names
    assert ("KJ_HTTP_PORT", "--http-port") in names
    assert len({variable for variable, _ in names}) == len(names)


def test_a_worker_nests_the_journal_settings_and_keeps_its_state_per_port() -> None:
    worker = WorkerSettings.from_env({"KJ_WEB_PORT": "7001", "KJ_TOPIC": "orders"})
    assert worker.datadir == Path(".worker/7001")
    assert worker.journal.topic == "orders"
    assert worker.url == "http://127.0.0.1:7001"
    assert WorkerSettings.from_env({"KJ_DATADIR": "/tmp/w"}).datadir == Path("/tmp/w")


def test_a_given_environment_is_read_instead_of_the_process_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KJ_TOPIC", "from_process")
    assert Settings.from_env({}).topic == "journal"
    assert Settings.from_env().topic == "from_process"


def test_replace_validates() -> None:
    settings = Settings.from_env({})
    assert settings.replace(topic="t").topic == "t"
    with pytest.raises(ValueError):
        settings.replace(partitions=0)


def test_an_appends_ttl_outlives_the_log_s_records_or_is_none() -> None:
    """Within Kafka's retention a subscription takes an Append without its `appends` row for
    a rejected one: a row must outlive its record (retention, plus a segment's roll)."""
    assert Settings.from_env({}).cassandra_config().appends_ttl_s == 0  # none
    day_ms = 24 * 60 * 60 * 1000
    least = 9 * 24 * 60 * 60  # a day of retention, plus 8 (a segment's roll, and slack)
    env = {"KJ_RETENTION_MS": str(day_ms), "KJ_APPENDS_TTL_S": str(least)}
    assert Settings.from_env(env).cassandra_config().appends_ttl_s == least
    with pytest.raises(SettingsError, match="KJ_APPENDS_TTL_S must be 0 or at least"):
        Settings.from_env({**env, "KJ_APPENDS_TTL_S": str(least - 1)})
