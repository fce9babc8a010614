"""Shared fixtures. `stack` gives integration tests the real Kafka and Cassandra.

The fixture is lazy (only tests that ask for it start servers) and session-scoped (servers
start once). It reuses servers that are already up (a developer's `kafka-journal stack up`,
or external ones from KJ_KAFKA_BOOTSTRAP / KJ_CASSANDRA_HOSTS), and at the end stops only what
it started. Servers it starts are tied to this process: they get SIGTERM when pytest dies,
even by SIGKILL, so an interrupted run leaves no JVM behind. When another test session reused
a server this one started, teardown waits for it (bounded: pytest-timeout also covers
teardown) before stopping. Running `kafka-journal stack up` once avoids all of that: then no
session owns the servers and none stops them.

`secured_stack` gives tests marked `secured` a stack with security on (stack/security.py,
app/provision.py):
the `stack` itself when KJ_SECURITY=on, otherwise a second stack beside it (data dir
`<dir>-secured`, every port + 100), so a plain run also proves the secured paths. With
KJ_SECURITY=on, integration tests not marked `secured` are deselected: they talk to the
servers without logins by design (`KJ_SECURITY=on make test` = unit + secured tests).

With KJ_TLS=true (and KJ_SECURITY=true) only the integration tests marked `tls` are collected
(`KJ_SECURITY=true KJ_TLS=true make test` = unit + tls tests): the others speak no TLS. A
`secured` test marked `tls` too runs on either stack (its clients' settings come from
tests/support/secured.py, which follows the stack). `tls_stack` is the stack with TLS; without
KJ_TLS the tests that ask for it are deselected, never skipped.

`keyspace` gives each module a fresh keyspace its harnesses share (one per module: creating
one is slow); `connected`, a harness on it shared by the module's tests (a module that needs
another defines its own).

`vectors` gives wire-format tests kafka-journal's reference vectors, read at test time from
../shared (never copied).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.provision import stack_up
from stack import Stack, StackSettings
from tests.support.harness import Harness, harness, unique

_WAIT_FOR_OTHER_SESSIONS = 200.0  # seconds; below the 300 s per-test timeout in pyproject


def _security_on() -> bool:
    return StackSettings.from_env().security == "on"


def _tls_on() -> bool:
    return StackSettings.from_env().tls == "on"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tls = _tls_on()
    if tls:  # only the tests marked for TLS know its settings (the CA, KJ_TLS)
        other = [i for i in items if "integration" in i.keywords and "tls" not in i.keywords]
    elif _security_on():
        other = [i for i in items if "integration" in i.keywords and "secured" not in i.keywords]
    else:
        other = []
    if not tls:  # they need the TLS stack: KJ_SECURITY=true KJ_TLS=true make test
        other += [
            i for i in items if "tls_stack" in getattr(i, "fixturenames", ()) and i not in other
        ]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


def _run(settings: StackSettings) -> Iterator[Stack]:
    servers = Stack(settings, tie_to_parent=True)
    stack_up(servers)  # with security on, the default journal provisioned too
    try:
        yield servers
    finally:
        servers.down(only_started=True, wait_for_others=_WAIT_FOR_OTHER_SESSIONS)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    yield from _run(StackSettings.from_env())


@pytest.fixture(scope="session")
def secured_stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    if _security_on():
        yield request.getfixturevalue("stack")
        return
    yield from _run(StackSettings.from_env().secured_twin())


@pytest.fixture(scope="session")
def tls_stack(stack: Stack) -> Stack:
    """The stack with TLS (KJ_TLS=true, KJ_SECURITY=true): tests marked `tls` are collected
    only then (`pytest_collection_modifyitems`)."""
    assert stack.settings.tls == "on", "a `tls` test runs on the TLS stack only"
    return stack


def _module_name(request: pytest.FixtureRequest) -> str:
    return str(request.module.__name__).rpartition(".")[2].removeprefix("test_")


@pytest.fixture(scope="module")
def keyspace(request: pytest.FixtureRequest) -> str:
    """kj_<the module's name without test_>_<random>."""
    return unique(f"kj_{_module_name(request)}")


@pytest.fixture(scope="module")
async def connected(
    request: pytest.FixtureRequest, stack: Stack, keyspace: str
) -> AsyncIterator[Harness]:
    """A harness on the module's keyspace and a fresh topic of 3 partitions, for the module's
    tests to share."""
    async with harness(stack, keyspace, f"journal_{_module_name(request)}") as one:
        yield one


def _interop_dir() -> Path:
    if env := os.environ.get("KJ_INTEROP_DIR"):
        return Path(env)
    here = Path(__file__).resolve()
    root = next((p for p in here.parents if (p / "pyproject.toml").is_file()), here.parents[1])
    return root.parent / "shared" / "interop" / "kafka-journal"


@pytest.fixture(scope="module")
def vectors() -> Path:
    directory = _interop_dir()
    if not directory.is_dir():
        missing = f"kafka-journal reference vectors not found at {directory} (KJ_INTEROP_DIR)"
        if os.environ.get("CI"):  # CI has shared/ beside the checkout: missing is a failure
            pytest.fail(missing)
        pytest.skip(missing)
    return directory
