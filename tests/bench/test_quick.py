"""`kafka-journal bench --quick` runs end to end and writes a report with every section."""

from __future__ import annotations

import contextlib
import math
import re
from pathlib import Path

import pytest

from app.cli import main
from stack import Stack

pytestmark = pytest.mark.integration

SECTIONS = (
    "Append",
    "Append compression",
    "Read (recovery)",
    "Reads with Cassandra down",
    "Encrypted journals",
    "Replication",
    "Huge journal over HTTP",
    "Spark rebuild",
    "Kafka consumer costs",
    "Subscription",
    "Recovery",
    "Replication of a spread backlog",
    "Console",
    "Append on a three-node cluster",
)


def _sections(markdown: str) -> dict[str, str]:
    parts = re.split(r"^## ", markdown, flags=re.MULTILINE)
    return {part.splitlines()[0]: part for part in parts[1:]}


def _numbers(section: str) -> list[float]:
    """The numbers of the value column of a section's table."""
    values = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and line.startswith("| ") and cells[0] != "measure":
            with contextlib.suppress(ValueError):
                values.append(float(cells[1].replace(",", "")))
    return values


# the quick run starts a worker, a Spark cluster and a browser: minutes on a loaded 2-core host
@pytest.mark.timeout(1200)
def test_quick_mode_writes_every_section_with_numbers(stack: Stack, tmp_path: Path) -> None:
    assert main(["bench", "--quick", "--out", str(tmp_path)]) == 0

    markdown = (tmp_path / "BENCHMARKS.md").read_text()
    sections = _sections(markdown)
    for title in SECTIONS:
        assert title in sections, f"no section {title!r}"
        assert _numbers(sections[title]), f"no numbers in {title!r}"
    # HTTP appends are measured against the raw HTTP server too (a baseline that did not start
    # fails the section, which then has no rows)
    assert "http_raw 1 ev/append, c=64: throughput" in sections["Append"]
    # the direct client's default (verified) path, beside its Kafka-acknowledged one
    assert "| direct_verified 1 ev/append, c=64: throughput |" in sections["Append"]
    # every lag point's p99 counts the appends still unreplicated when the wait ended
    assert "unreplicated appends counted |" in sections["Replication"]
    # the subscription groups' members ran in processes of their own, and a live group's lag
    # was measured at an offered load (a member that failed fails the section: no rows)
    subscription = sections["Subscription"]
    # the goal row names its baseline (the raw consumer decoding as the subscription does);
    # the other two baselines have rows of their own
    assert "(baseline: a raw consumer decoding as it does) |" in subscription
    assert "| note: the same against a raw consumer that decodes nothing |" in subscription
    assert "| note: the same against a raw consumer that orjson-decodes every payload |" in (
        subscription
    )
    assert "| subscription group of 3: events/s delivered, all members |" in subscription
    lag = "| subscription group of 3, live: append acknowledged -> delivered to a member, p99 |"
    assert lag in subscription
    # the Spark rebuild ran (tiny) and measured: a failed run shows n/a, never a number
    spark = _numbers(sections["Spark rebuild"])
    assert all(math.isfinite(value) and value > 0 for value in spark), sections["Spark rebuild"]
    assert "## Goals" in markdown and "load average" in markdown
    assert re.search(r"Kafka \d", markdown) and re.search(r"Cassandra \d", markdown)
    assert list((tmp_path / "docs" / "bench").glob("*.png")) or "No plots" in markdown
