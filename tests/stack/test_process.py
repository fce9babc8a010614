"""stack.process with plain `sleep` children (no JVM, no server): pid files, stale detection,
stop, and tie_to_parent surviving worker threads but not a SIGKILLed parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from stack import process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc, prctl")

REPO = Path(__file__).resolve().parents[2]


def spawn_sleep(tmp_path: Path, *, tie: bool = False, marker: str = "300") -> int:
    return process.spawn(
        ["sleep", marker],
        cwd=tmp_path,
        log_file=tmp_path / "logs" / "sleep.out",
        pid_file=tmp_path / "sleep.pid",
        tie_to_parent=tie,
    )


def test_spawn_writes_a_pid_file_and_stop_ends_the_process(tmp_path: Path) -> None:
    pid = spawn_sleep(tmp_path)
    try:
        assert process.running_pid(tmp_path / "sleep.pid", "300") == pid
        assert os.getpgid(pid) == pid, "the child must lead its own process group"
        assert "starting: sleep 300" in (tmp_path / "logs" / "sleep.out").read_text()
    finally:
        assert process.stop(pid, timeout=10) is True
    assert not process.is_alive(pid)
    assert process.running_pid(tmp_path / "sleep.pid", "300") is None
    assert not (tmp_path / "sleep.pid").exists(), "a stale pid file is removed"


def test_a_pid_file_naming_a_foreign_process_is_stale(tmp_path: Path) -> None:
    (tmp_path / "foreign.pid").write_text(f"{os.getpid()}\n")  # alive, but not ours
    assert process.running_pid(tmp_path / "foreign.pid", "-Dkafka-journal.home=/x") is None
    assert not (tmp_path / "foreign.pid").exists()


def test_kill9_ends_the_process_at_once(tmp_path: Path) -> None:
    pid = spawn_sleep(tmp_path)
    process.kill9(pid)
    assert not process.is_alive(pid)


def test_a_tied_child_outlives_the_thread_that_started_it(tmp_path: Path) -> None:
    pids: list[int] = []
    worker = threading.Thread(target=lambda: pids.append(spawn_sleep(tmp_path, tie=True)))
    worker.start()
    worker.join()
    time.sleep(0.5)  # PDEATHSIG would have fired by now if the worker thread were the parent
    try:
        assert process.is_alive(pids[0])
    finally:
        process.stop(pids[0], timeout=10)


def test_a_tied_child_dies_when_its_parent_is_killed_with_sigkill(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(REPO)!r})
        from stack import process
        tmp = Path({str(tmp_path)!r})
        pid = process.spawn(["sleep", "301"], cwd=tmp, log_file=tmp / "out",
                            pid_file=tmp / "child.pid", tie_to_parent=True)
        print(pid, flush=True)
        time.sleep(300)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert process.is_alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    try:
        assert process.wait_exit(child, timeout=10), "the tied child outlived its SIGKILLed parent"
    finally:
        if process.is_alive(child):
            os.kill(child, signal.SIGKILL)
