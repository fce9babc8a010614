"""Child JVMs: started detached with a pid file, found again later, stopped or killed.

Contract:
- `spawn` starts a command in its own session and process group (so a Ctrl-C in the
  terminal does not reach it and `stop` can signal the whole group), stdout and stderr appended
  to a log file, stdin closed, and writes the pid file. It returns at once: readiness is the
  caller's business.
- `tie_to_parent=True` asks Linux to SIGTERM the child when this Python process dies, even by
  SIGKILL (prctl PR_SET_PDEATHSIG). The kernel ties the child to the *thread* that forked it,
  so tied children are forked by one long-lived spawner thread, never by a short-lived worker
  thread whose exit would take the server down with it. Ignored off Linux.
- `running_pid` reads a pid file and answers the pid only if that process is alive (not a
  zombie) and its command line carries the given marker; otherwise the file is stale and is
  removed, which guards against pid reuse after a reboot or crash.
- `stop` sends SIGTERM to the group, waits, then SIGKILLs it; `kill9` SIGKILLs at once.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1

# Our own children, so their exit status is collected (a zombie would look alive to kill(0)).
_children: dict[int, subprocess.Popen[bytes]] = {}
_children_lock = threading.Lock()


def _pdeathsig_preexec() -> Callable[[], None]:
    """A preexec_fn that arms PR_SET_PDEATHSIG; libc is looked up here, before any fork."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent:
            os._exit(1)

    return arm


class _Spawner:
    """One daemon thread that forks every tied child, so PDEATHSIG fires only at process exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[
                Callable[[], subprocess.Popen[bytes]],
                concurrent.futures.Future[subprocess.Popen[bytes]],
            ]
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="stack-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job, future = self._jobs.get()
            try:
                future.set_result(job())
            except BaseException as error:  # handed to the caller, who re-raises it
                future.set_exception(error)

    def submit(self, job: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        future: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        self._jobs.put((job, future))
        return future.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _tied_spawner() -> _Spawner:
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
        return _spawner


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    log_file: Path,
    pid_file: Path,
    env: Mapping[str, str] | None = None,
    tie_to_parent: bool = False,
) -> int:
    """Start `argv` detached (see the module contract) and return its pid."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    tie = tie_to_parent and sys.platform.startswith("linux")
    preexec = _pdeathsig_preexec() if tie else None
    with log_file.open("ab") as log:
        log.write(
            f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode()
        )
        log.flush()

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=None if env is None else dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
            )

        child = _tied_spawner().submit(start) if tie else start()
    with _children_lock:
        _children[child.pid] = child
    tmp = pid_file.with_suffix(".tmp")
    tmp.write_text(f"{child.pid}\n", encoding="utf-8")
    tmp.replace(pid_file)  # atomic: a reader never sees a half-written pid
    return child.pid


def is_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as dead."""
    with _children_lock:
        child = _children.get(pid)
    if child is not None:
        if child.poll() is not None:
            with _children_lock:
                _children.pop(pid, None)
            return False
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): kill(0) is all we can know
    return stat.rpartition(")")[2].split()[0] != "Z"


def command_line(pid: int) -> list[str] | None:
    """The argv of a running process (Linux /proc), None when unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid in `pid_file` if that process is alive and carries `marker`; else None."""
    try:
        pid = int(pid_file.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if is_alive(pid):
        with _children_lock:
            ours = pid in _children  # maybe still between fork and exec: old cmdline
        argv = None if ours else command_line(pid)
        if argv is None or marker in argv:
            return pid
    # Stale: the process is gone, or the pid now belongs to an unrelated process.
    with contextlib.suppress(OSError):
        pid_file.unlink()
    return None


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `pid` to end; True if it did."""
    deadline = time.monotonic() + timeout
    while is_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # the pid leads its own group: spawn used a new session
    except ProcessLookupError:
        pass
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop(pid: int, timeout: float) -> bool:
    """SIGTERM the process group, SIGKILL it after `timeout` s; True if it ended on SIGTERM."""
    _signal_group(pid, signal.SIGTERM)
    if wait_exit(pid, timeout):
        return True
    kill9(pid)
    return False


def kill9(pid: int) -> None:
    """SIGKILL the process group and wait (briefly) until the process is gone."""
    _signal_group(pid, signal.SIGKILL)
    wait_exit(pid, 10.0)
