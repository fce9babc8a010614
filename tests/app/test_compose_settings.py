"""docker-compose.yml sets only `KJ_*` variables the settings models know, and the worker's
load into settings that bind every interface and advertise a URL others reach.

Read with PyYAML (the dev extra), not Docker: no engine is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import WorkerSettings
from journal.settings import Settings
from kjconfig.settings import KJSettings
from stack.settings import StackSettings

REPO = Path(__file__).resolve().parents[2]
MODELS: tuple[type[KJSettings], ...] = (Settings, WorkerSettings, StackSettings)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    found = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    assert isinstance(found, dict)
    return found


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def known_variables() -> set[str]:
    return {owner.variable_of(name) for m in MODELS for owner, name, _ in m.settings_fields()}


def test_every_kj_variable_the_compose_file_sets_is_a_setting(services: dict[str, Any]) -> None:
    set_here = {
        (service, variable)
        for service, spec in services.items()
        for variable in spec.get("environment") or {}
        if variable.startswith("KJ_")
    }
    assert set_here, "the worker is configured by KJ_* variables"
    assert {pair for pair in set_here if pair[1] not in known_variables()} == set()


def test_the_worker_binds_every_interface_and_advertises_its_service_name(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    worker = services["worker"]
    settings = WorkerSettings.from_env({k: str(v) for k, v in worker["environment"].items()})
    assert settings.web_host == "0.0.0.0"
    assert settings.url == f"http://worker:{settings.web_port}"
    assert f"{settings.web_port}:{settings.web_port}" in worker["ports"]
    assert (settings.journal.cassandra_host_list, settings.journal.cassandra_port) == (
        ("cassandra",),
        9042,
    )
    # the tables' state outlives the container: the data dir is on the named volume
    mounts = dict(volume.split(":", 1) for volume in worker["volumes"])
    assert "worker-data" in compose["volumes"]
    assert settings.datadir.is_relative_to(mounts["worker-data"])


def test_every_server_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name in ("kafka", "cassandra", "worker"):
        assert services[name]["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    assert "/readyz" in " ".join(services["worker"]["healthcheck"]["test"])
