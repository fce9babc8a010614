"""Progress lines for long steps (jar downloads, storage format, server start).

Contract: a `Progress` is any callable taking one line of text (`jars.Progress`). The default writes
`[stack] <line>` to stderr and flushes, so a command's real output on stdout stays parseable
and the line shows up at once even when stderr is a pipe.
"""

from __future__ import annotations

import sys

from jars import Progress, no_progress

__all__ = ["Progress", "no_progress", "print_progress"]


def print_progress(line: str) -> None:
    print(f"[stack] {line}", file=sys.stderr, flush=True)
