"""Which masters the session treats as on this machine (loopback driver, this Python)."""

from __future__ import annotations

import pytest

from pipeline.session import SparkOptions


@pytest.mark.parametrize(
    ("master", "here"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077", True),
        ("spark://[::1]:7077", True),
        ("spark://10.0.0.5:7077", False),
        ("spark://spark-master:7077", False),
        ("yarn", False),
    ],
)
def test_local_and_loopback_standalone_masters_are_on_this_machine(master: str, here: bool) -> None:
    assert SparkOptions(master=master).on_this_machine is here
