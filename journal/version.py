"""This journal's version, written in the `version` field of every action it produces.

kafka-journal writes its own library version there (`Version.current`, "unknown" when the jar
has none); this project writes its distribution's version the same way, so a reader can tell
which writer produced an action.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def _installed_version() -> str:
    try:
        return version("kafka-journal")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


VERSION = _installed_version()
