"""Progress lines of the pipeline's jobs: one line per stage, with counts.

Contract: a job takes a `Progress` (any callable taking one line; `jars.Progress`)
and calls it at each stage. The default writes `[pipeline] <line>` to stderr and flushes, so
a job's report on stdout stays parseable.
"""

from __future__ import annotations

import sys

from jars import Progress, no_progress

__all__ = ["Progress", "no_progress", "per_second", "print_progress"]


def print_progress(line: str) -> None:
    print(f"[pipeline] {line}", file=sys.stderr, flush=True)


def per_second(count: int, seconds: float) -> str:
    """`count` over `seconds` as a rate for a progress line, e.g. '1234/s'."""
    return f"{count / seconds:.0f}/s" if seconds > 0 else "-"
