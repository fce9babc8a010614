"""A progress meter for the long commands (quarantine replay, the pipeline's jobs): done of
total, rate and ETA, on stderr.

On a terminal it is one line, redrawn; otherwise (a log, a pipe) a plain line at most every
`every_s` seconds and one at the end, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Meter:
    """Progress of `total` `unit`s (see the module docstring)."""

    def __init__(
        self,
        label: str,
        total: int,
        unit: str = "records",
        stream: TextIO | None = None,
        every_s: float = 5.0,
    ) -> None:
        self._label, self._total, self._unit = label, total, unit
        self._stream = sys.stderr if stream is None else stream
        self._terminal = self._stream.isatty()
        self._every_s = every_s
        self._started = self._shown = time.monotonic()
        self._done = 0

    def advance(self, count: int = 1) -> None:
        self.update(self._done + count)

    def update(self, done: int, total: int | None = None) -> None:
        """`done` units so far (of `total`, when it changed: a job's stages add tasks)."""
        self._done, self._total = done, self._total if total is None else total
        now = time.monotonic()
        if self._terminal:
            self._stream.write(f"\r{self.line(now)}\033[K")
            self._stream.flush()
        elif now - self._shown >= self._every_s:
            self._shown = now
            print(self.line(now), file=self._stream, flush=True)

    def close(self) -> None:
        """The last line: where it ended and the overall rate."""
        line = self.line(time.monotonic())
        self._stream.write(f"\r{line}\033[K\n" if self._terminal else f"{line}\n")
        self._stream.flush()

    def line(self, now: float) -> str:
        elapsed = now - self._started
        rate = self._done / elapsed if elapsed > 0 else 0.0
        left = self._total - self._done
        eta = f"{left / rate:.0f} s" if rate > 0 and left > 0 else "-"
        return f"{self._label}: {self._done}/{self._total} {self._unit}, {rate:.1f}/s, ETA {eta}"
