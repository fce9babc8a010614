"""`kafka-journal stack up | down | status`.

Contract: `run_stack(command, settings)` returns the exit code (`app/cli.py` declares the
commands, and the settings' flags from `StackSettings`):
- `up`: start what is missing (reusing healthy servers), print the status; 0 when both are
  healthy. Servers keep running after the command ends.
- `down`: stop both servers cleanly; 0 when done (external servers are left alone).
- `status`: one block per server (kind, address, pid, ports, version, data dir, log, health);
  a Kafka cluster's block has a line per node (up/down, pid, ports), the controller quorum
  (leader, voters) and the count of under-replicated partitions. 0 when both servers (every
  node) are healthy, 1 otherwise.
Progress of long steps goes to stderr, the status to stdout. A `StackError` or a bad
setting is printed as one message with exit code 2, not a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from stack.errors import StackError
from stack.server import ServerStatus
from stack.settings import StackSettings

if TYPE_CHECKING:
    from stack.stack import Stack


def _ports(status: ServerStatus) -> str:
    return ", ".join(f"{role} {port}" for role, port in status.ports.items()) or "-"


def _node_line(node: ServerStatus) -> str:
    pid = node.pid if node.pid is not None else "-"
    return f"  {node.name:<9} {'up' if node.healthy else 'DOWN'}, pid {pid}, {_ports(node)}"


def format_status(status: ServerStatus) -> str:
    if status.nodes:
        lines = [
            f"{status.name}: {'healthy' if status.healthy else 'NOT healthy'} ({status.kind}, "
            f"{len(status.nodes)} nodes)",
            f"  address   {status.address}",
            *(_node_line(node) for node in status.nodes),
            *(f"  {title:<9} {text}" for title, text in status.facts),
            f"  version   {status.version or '-'}",
            f"  data dir  {status.data_dir or '-'}",
        ]
        if status.detail and not status.healthy:
            lines.append(f"  why       {status.detail}")
        return "\n".join(lines)
    ports = _ports(status)
    lines = [
        f"{status.name}: {'healthy' if status.healthy else 'NOT healthy'} ({status.kind})",
        f"  address   {status.address}",
        f"  pid       {status.pid if status.pid is not None else '-'}",
        f"  ports     {ports}",
        f"  version   {status.version or '-'}",
        f"  data dir  {status.data_dir or '-'}",
        f"  log       {status.log_file or '-'}",
    ]
    if status.detail:
        lines.append(f"  {'state' if status.healthy else 'why  '}     {status.detail}")
    return "\n".join(lines)


def run_stack(
    command: str,
    settings: StackSettings,
    timeout: float | None = None,
    up: Callable[[Stack, float | None], object] | None = None,
) -> int:
    """`up`, `down` or `status` on a stack of `settings`; the exit code (module contract).
    `up` brings the stack up instead of `Stack.up` (app/ provisions the journal after it)."""
    from stack.stack import Stack  # after parsing, so `--help` stays instant

    try:
        stack = Stack(settings)
        if command == "up":
            if up is None:
                stack.up(timeout)
            else:
                up(stack, timeout)
        elif command == "down":
            stack.down()
            return 0
        statuses = stack.status()
    except (StackError, ValueError) as error:
        print(f"kafka-journal stack {command}: {error}", file=sys.stderr)
        return 2
    print("\n".join(format_status(status) for status in statuses))
    return 0 if all(status.healthy for status in statuses) else 1
