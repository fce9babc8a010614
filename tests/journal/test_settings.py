"""The one settings loader: defaults, KJ_* variables, flags; bad values name their source."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import WorkerSettings
from journal.settings import Settings
from kjconfig.settings import SettingsError


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


def test_a_bad_flag_is_named_as_a_flag() -> None:
    with pytest.raises(SettingsError, match=r"^--web-port='x'"):
        WorkerSettings.from_env({"KJ_WEB_PORT": "7000"}, web_port="x")


def test_each_setting_has_one_variable_and_one_flag() -> None:
    names = [
        (model.variable_of(n), model.flag_of(n)) for model, n, _ in WorkerSettings.settings_fields()
    ]
    assert ("KJ_KAFKA_BOOTSTRAP", "--kafka-bootstrap") in names
    assert ("KJ_WEB_PORT", "--web-port") in names
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
