"""The settings' naming rule (kjconfig/settings.py): old names keep working and warn naming the
new one, the new wins when both are set; booleans are true | false; the stack's "external" is a
variable of its own, apart from where the servers are."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import _with_old_flags, cli
from app.settings import WorkerSettings
from journal.settings import Settings
from kjconfig.settings import RENAMED, DeprecatedSetting, SettingsError, lookup
from stack.settings import StackSettings


def test_an_old_variable_works_and_warns_naming_the_new_one() -> None:
    with pytest.warns(DeprecatedSetting, match="KJ_WEB_PORT is deprecated: use KJ_HTTP_PORT"):
        worker = WorkerSettings.from_env({"KJ_WEB_PORT": "7005"})
    assert worker.web_port == 7005
    with pytest.warns(DeprecatedSetting, match="use KJ_WORKER_DIR"):
        assert WorkerSettings.from_env({"KJ_DATADIR": "/tmp/w"}).datadir == Path("/tmp/w")
    with pytest.warns(DeprecatedSetting, match="use KJ_STACK_TIMEOUT_S"):
        assert StackSettings.from_env({"KJ_STACK_TIMEOUT": "90"}).start_timeout == 90


def test_the_new_name_wins_over_the_old_and_the_warning_says_so() -> None:
    env = {"KJ_HTTP_PORT": "7006", "KJ_WEB_PORT": "7005"}
    with pytest.warns(DeprecatedSetting, match="KJ_WEB_PORT is deprecated and ignored"):
        assert WorkerSettings.from_env(env).web_port == 7006


def test_a_bad_value_names_the_old_variable_it_was_given_by() -> None:
    with pytest.warns(DeprecatedSetting), pytest.raises(SettingsError, match=r"^KJ_WEB_PORT="):
        WorkerSettings.from_env({"KJ_WEB_PORT": "http"})


def test_a_value_read_outside_a_model_finds_its_old_name_too() -> None:
    env = {"KJ_RECORDER_TIMEOUT": "5"}
    with pytest.warns(DeprecatedSetting, match="use KJ_RECORDER_TIMEOUT_S"):
        assert lookup(env.get, "KJ_RECORDER_TIMEOUT_S") == "5"
    empty: dict[str, str] = {}
    assert lookup(empty.get, "KJ_RECORDER_TIMEOUT_S") is None


def test_an_old_flag_works_and_warns_naming_the_new_one() -> None:
    with pytest.warns(DeprecatedSetting, match="--web-port is deprecated: use --http-port"):
        moved = _with_old_flags({"web_port": None, "web_port__old__kj_web_port": "7007"})
    assert WorkerSettings.from_flags(moved).web_port == 7007
    with pytest.warns(DeprecatedSetting, match="--datadir is deprecated and ignored"):
        moved = _with_old_flags({"datadir": "/new", "datadir__old__kj_datadir": "/old"})
    assert moved == {"datadir": "/new"}


def test_every_old_flag_is_accepted_by_the_command_line() -> None:
    result = CliRunner().invoke(cli, ["worker", "--web-port", "http"])
    assert result.exit_code == 2, result.output
    assert "--http-port='http'" in result.output


def test_every_renamed_variable_follows_the_rule() -> None:
    for new in RENAMED.values():
        assert new.startswith("KJ_HTTP_") or new.endswith(("_S", "_MS", "_DIR")), new


@pytest.mark.parametrize(("given", "switch"), [("true", "on"), ("false", "off"), ("on", "on")])
def test_booleans_are_true_or_false_and_on_off_still_works(given: str, switch: str) -> None:
    settings = Settings.from_env({"KJ_SECURITY": given, "KJ_HTTP_SECURITY": given})
    assert (settings.security, settings.http_auth.http_security) == (switch, switch)
    assert StackSettings.from_env({"KJ_SECURITY": given}).security == switch
    with pytest.raises(SettingsError, match="KJ_SECURITY='maybe'"):
        Settings.from_env({"KJ_SECURITY": "maybe"})


def test_a_stack_on_other_ports_and_its_clients_share_one_environment() -> None:
    env = {
        "KJ_EXTERNAL_KAFKA": "false",
        "KJ_KAFKA_PORT": "19192",
        "KJ_KAFKA_CONTROLLER_PORT": "19193",
        "KJ_KAFKA_BOOTSTRAP": "127.0.0.1:19192",
    }
    stack = StackSettings.from_env(env)
    assert not stack.kafka_external
    assert stack.kafka_bootstrap == Settings.from_env(env).kafka_bootstrap == "127.0.0.1:19192"


def test_external_is_said_by_its_own_variable() -> None:
    env = {"KJ_EXTERNAL_KAFKA": "true", "KJ_KAFKA_BOOTSTRAP": "k1:9092"}
    stack = StackSettings.from_env(env)
    assert stack.kafka_external and not stack.cassandra_external
    assert stack.kafka_bootstrap == "k1:9092"
    with pytest.raises(SettingsError, match="KJ_EXTERNAL_CASSANDRA=true needs KJ_CASSANDRA_HOSTS"):
        StackSettings.from_env({"KJ_EXTERNAL_CASSANDRA": "true"})


def test_an_address_alone_still_means_external_with_a_warning() -> None:
    with pytest.warns(DeprecatedSetting, match="set KJ_EXTERNAL_KAFKA=true"):
        stack = StackSettings.from_env({"KJ_KAFKA_BOOTSTRAP": "k1:9092"})
    assert stack.kafka_external
