"""The journal id listing's scenario, for the direct client and HTTP alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from journal.core.model import Event, JsonPayload
from tests.support.journal_api import JournalApi

# a page of ids and the cursor to the next one (None: the end)
IdPages = Callable[[str, str | None, int], Awaitable[tuple[list[str], str | None]]]


def events(first: int, last: int) -> list[Event]:
    return [Event(n, payload=JsonPayload.of(n)) for n in range(first, last + 1)]


async def all_pages(pages: IdPages, prefix: str, limit: int) -> list[list[str]]:
    """Every page of `prefix`, following `next` (bounded: a cursor must move forward)."""
    got: list[list[str]] = []
    after: str | None = None
    for _ in range(100):
        ids, after_next = await pages(prefix, after, limit)
        assert len(ids) <= limit, ids
        got.append(ids)
        if after_next is None:
            return got
        assert after is None or after_next > after, (after, after_next)
        after = after_next
    raise AssertionError(f"no end after 100 pages: {got}")


async def populate(
    api: JournalApi, prefix: str, replicate: Callable[[], Awaitable[object]]
) -> None:
    """Journals `prefix`1..6 in every state; only 1, 2, 3 and 5 exist in the end.

    1, 2 and 4 are replicated; then, maybe unreplicated: 2 grows, 3 and 5 are new, 4 is
    purged; 6 is appended and purged; `r` (replicated) and `u` are purged journals; `x` has
    only a rejected Append (it starts at seqNr 2)."""
    for n in (1, 2, 4):
        await api.append(f"{prefix}{n}", events(1, 2))
    await api.append(f"{prefix}r", events(1, 1))
    await api.purge(f"{prefix}r")
    await api.append(f"{prefix}u", events(1, 1))
    await replicate()
    await api.purge(f"{prefix}u")
    await api.append(f"{prefix}2", events(3, 4))
    await api.append(f"{prefix}3", events(1, 1))
    await api.append(f"{prefix}5", events(1, 1))
    await api.purge(f"{prefix}4")
    await api.append(f"{prefix}6", events(1, 1))
    await api.purge(f"{prefix}6")
    await api.append(f"{prefix}x", events(2, 3))
    await api.append(f"other-{prefix}1", events(1, 1))


def existing(prefix: str) -> list[str]:
    return [f"{prefix}{n}" for n in (1, 2, 3, 5)]
