"""The progress meter: a redrawn line on a terminal, plain lines (throttled) otherwise."""

from __future__ import annotations

import io

from app.progress import Meter


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_it_writes_plain_lines_throttled_and_the_last() -> None:
    out = io.StringIO()
    meter = Meter("replay", 10, stream=out, every_s=3600)
    for _ in range(10):
        meter.advance()
    assert out.getvalue() == ""  # within every_s: nothing yet
    meter.close()
    (line,) = out.getvalue().splitlines()
    assert line.startswith("replay: 10/10 records, ") and line.endswith("ETA -")
    assert "\r" not in out.getvalue()


def test_on_a_terminal_it_redraws_one_line_with_rate_and_eta() -> None:
    out = Terminal()
    meter = Meter("import", 4, "Spark tasks", stream=out)
    meter.update(1)
    meter.update(2, total=8)  # a later stage added tasks
    meter.close()
    drawn = out.getvalue()
    assert drawn.count("\r") == 3 and drawn.endswith("\n")
    assert "import: 2/8 Spark tasks" in drawn
    assert "ETA " in drawn
