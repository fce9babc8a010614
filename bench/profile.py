"""Sampling profiles of another process with py-spy (if installed), summarised as text."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)")


def process_cpu_s(pid: int) -> float:
    """The CPU time (user + system, all threads) process `pid` has used so far, in seconds."""
    # /proc/<pid>/stat: fields 14 and 15 (utime, stime), counted after the ")" that ends the
    # command name, which may itself hold spaces
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_cpu_jiffies() -> tuple[int, int]:
    """The host's busy and total CPU time so far (all cores, /proc/stat's `cpu` line)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def host_busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The fraction of the host's CPU time (all cores) that was busy between two
    `host_cpu_jiffies`."""
    total = after[1] - before[1]
    return 0.0 if total <= 0 else (after[0] - before[0]) / total


def py_spy_path() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


async def py_spy(pid: int, seconds: float) -> str:
    """Sample `pid` for `seconds` (all threads, 100 Hz); a summary, or why there is none."""
    tool = py_spy_path()
    if tool is None:
        return "(py-spy is not installed: no profile)"
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "stacks.txt"
        process = await asyncio.create_subprocess_exec(
            tool,
            "record",
            "-p",
            str(pid),
            "-d",
            str(max(1, round(seconds))),
            "-f",
            "raw",
            "-o",
            str(out),
            "--nonblocking",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, error = await process.communicate()
        if process.returncode != 0 or not out.exists():
            return f"(py-spy failed: {error.decode(errors='replace').strip()[-300:]})"
        return summarize(out.read_text())


def summarize(raw: str, top: int = 20) -> str:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if total == 0:
        return "(no samples)"
    lines = [f"{total} samples; self time, top {top}:"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines += ["", f"inclusive time, top {top}:"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines)
