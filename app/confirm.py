"""An operator command's consent: what it is about to change was printed; a person at a
terminal says yes, a script says `--yes`. One rule for every command that changes what others
rely on (`repair`, `quarantine replay`, `groups reset`).

Exit codes such a command uses: 1 when it refuses (the state does not call for it, or the
operator said no), 2 when it cannot ask (standard input is no terminal and `--yes` was not
given), 75 when Kafka or Cassandra did not answer (try again).
"""

from __future__ import annotations

import sys

import click

REFUSED_EXIT = 1
CANNOT_ASK_EXIT = 2
UNAVAILABLE_EXIT = 75  # EX_TEMPFAIL, as the client's


class NotConfirmed(Exception):
    """The operator did not consent; `exit_code` says how (declined, or could not be asked)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def confirm(question: str, yes: bool) -> None:
    """Return if the operator consents to `question`: `yes` (`--yes`), or a yes at the
    terminal; else NotConfirmed."""
    if yes:
        return
    if not sys.stdin.isatty():
        # a script that forgot --yes must not change anything, nor hang on a prompt
        raise NotConfirmed(
            "standard input is not a terminal: give --yes to proceed", CANNOT_ASK_EXIT
        )
    if not click.confirm(question, default=False):
        raise NotConfirmed("not confirmed: nothing changed", REFUSED_EXIT)


def failed(command: str, message: str, exit_code: int) -> int:
    """Say why `kafka-journal <command>` changed nothing, on stderr; its exit code."""
    print(f"kafka-journal {command}: {message}", file=sys.stderr)
    return exit_code
