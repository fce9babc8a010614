"""Which processes are using a server right now, so one test session does not stop a server
another session is still using.

Contract: a lease is a file `<server dir>/leases/<pid>`. `take` writes this process's lease,
`drop` removes it, `holders` lists the other processes whose leases are alive (leases of
dead processes are removed on the way, so a SIGKILLed session never blocks anybody).
Leases are advisory: `Stack.down(only_started=True)` waits for other holders, bounded,
before stopping a server it started; an explicit `stack down` does not.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from stack import process


def _directory(server_dir: Path) -> Path:
    return server_dir / "leases"


def take(server_dir: Path) -> None:
    directory = _directory(server_dir)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / str(os.getpid())).touch()


def drop(server_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (_directory(server_dir) / str(os.getpid())).unlink()


def holders(server_dir: Path) -> list[int]:
    """Pids of other live processes holding a lease on the server."""
    alive: list[int] = []
    directory = _directory(server_dir)
    if not directory.is_dir():
        return alive
    for lease in directory.iterdir():
        if not lease.name.isdigit() or int(lease.name) == os.getpid():
            continue
        if process.is_alive(int(lease.name)):
            alive.append(int(lease.name))
        else:
            with contextlib.suppress(OSError):
                lease.unlink()
    return sorted(alive)


def wait_until_released(server_dir: Path, within: float) -> list[int]:
    """Wait up to `within` s until no other process holds a lease; return those still holding."""
    deadline = time.monotonic() + within
    while True:
        others = holders(server_dir)
        if not others or time.monotonic() >= deadline:
            return others
        time.sleep(1.0)
