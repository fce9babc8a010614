""" "A journal" as the semantic suite sees it, whatever is behind: the direct client or HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from journal.core.model import Event


class JournalApi(Protocol):
    async def append(self, journal_id: str, events: Sequence[Event]) -> None:
        """Append as Kafka acknowledges it (ack=kafka): the fold decides what is visible, and
        the suite checks it decides alike on every path."""
        ...

    async def read(
        self, journal_id: str, from_: int = 1, to: int | None = None, limit: int | None = None
    ) -> list[Event]: ...

    async def info(self, journal_id: str) -> tuple[int | None, int | None]:
        """(last seqNr, deleteTo)"""
        ...

    async def delete(self, journal_id: str, to: int) -> int | None:
        """The deleteTo after the call, None when the journal has nothing to delete."""
        ...

    async def purge(self, journal_id: str) -> None: ...

    async def settle(self) -> None:
        """Give replication its chance (the suite calls it between steps)."""
        ...
