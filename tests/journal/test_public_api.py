"""`journal` names what a user imports; importing it loads none of the drivers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import journal


def test_every_public_name_resolves() -> None:
    for name in journal.__all__:
        assert getattr(journal, name) is not None, name


def test_importing_journal_loads_no_driver() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, journal; print(sorted({'aiokafka', 'cassandra'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],  # this checkout's journal/
    ).stdout.strip()
    assert loaded == "[]"
