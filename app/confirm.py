"""An operator command's consent: what it is about to change was printed; a person at a
terminal says yes, a script says `--yes`. One rule for every command that changes what others
rely on (`repair`, `quarantine replay`, `groups reset`).

Exit codes such a command uses: 1 when it refuses (the state does not call for it, or the
operator said no), 2 when it cannot ask (standard input is no terminal and `--yes` was not
given), 75 when Kafka or Cassandra did not answer (try again).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import click

from journal.errors import SetupMissing, Unavailable
from journal.settings import Settings
from journal.store import CassandraStore

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


def run_resumable(
    command: str,
    settings: Settings,
    work: Callable[[CassandraStore], Awaitable[object]],
    refused: type[Exception],
) -> int:
    """Run `work` of a command that resumes from what it recorded (`topic grow`, `schema
    grow-listing`) on a store of its own; its exit code: 0 done (or the dry run printed),
    1 `refused` or the schema lacks its table (SetupMissing), 2 cannot ask, 75 Kafka or
    Cassandra did not answer (run it again: it resumes)."""

    async def run() -> None:
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            await work(store)
        finally:
            await store.close()

    try:
        asyncio.run(run())
    except (refused, SetupMissing) as error:
        return failed(command, str(error), REFUSED_EXIT)
    except NotConfirmed as error:
        return failed(command, str(error), error.exit_code)
    except (Unavailable, TimeoutError) as error:
        return failed(command, f"{error} (run it again: it resumes)", UNAVAILABLE_EXIT)
    return 0
