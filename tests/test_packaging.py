"""A core install (`pip install kafka-journal`, no extra) serves journal/ and the command line's
client verbs: none of them imports the worker's or the pipeline's packages, and a command that
needs an extra names it.

Each check runs in a fresh interpreter, so what earlier tests imported cannot hide an import.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTRAS_ONLY = ("faust", "mode", "rocksdict", "uvloop", "pyspark")

# every module of these packages, and the app modules the client verbs load (app/cli.py)
_IMPORT_ALL = f"""
import importlib, pkgutil, sys
for package in ("journal", "kjconfig", "web", "stack"):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(info.name)
for name in ("app.cli", "app.client", "app.http_tokens", "app.provision", "app.settings"):
    importlib.import_module(name)
print(sorted(name for name in {EXTRAS_ONLY!r} if name in sys.modules))
"""

# as in an install without the extras: importing one of them fails
_WITHOUT_EXTRAS = f"""
import sys
for name in {EXTRAS_ONLY!r}:
    sys.modules[name] = None
"""


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_journal_and_the_client_verbs_modules_import_no_extra() -> None:
    done = python(_IMPORT_ALL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_client_verbs_run_without_the_extras() -> None:
    code = (
        _WITHOUT_EXTRAS
        + _IMPORT_ALL
        + """
from app.cli import main
for verb in ((), ("append",), ("read",), ("lag",), ("token",), ("stack", "status")):
    assert main([*verb, "--help"]) == 0, verb
# a bad body is refused before connecting: the client's validation loads without extras
assert main(["append", "x", "--data", "{"]) == 2
"""
    )
    done = python(code)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("program", "argv", "extra"),
    [
        ("app.cli", ["worker"], "worker"),
        ("app.cli", ["run"], "worker"),
        ("app.cli", ["bench", "--quick"], "bench"),
        ("pipeline.commands", ["audit"], "spark"),
    ],
)
def test_a_command_without_its_extra_says_which_to_install(
    program: str, argv: list[str], extra: str
) -> None:
    code = (
        _WITHOUT_EXTRAS
        + f"""
from {program} import main
assert main({argv!r}) == 1
"""
    )
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'kafka-journal[{extra}]'" in done.stderr
