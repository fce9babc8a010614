"""kafka-journal's reference vectors, read at test time from ../shared (never copied)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _interop_dir() -> Path:
    if env := os.environ.get("KJ_INTEROP_DIR"):
        return Path(env)
    here = Path(__file__).resolve()
    root = next((p for p in here.parents if (p / "pyproject.toml").is_file()), here.parents[3])
    return root.parent / "shared" / "interop" / "kafka-journal"


@pytest.fixture(scope="module")
def vectors() -> Path:
    directory = _interop_dir()
    if not directory.is_dir():
        pytest.skip(f"kafka-journal reference vectors not found at {directory} (KJ_INTEROP_DIR)")
    return directory
