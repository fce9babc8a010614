"""Reading the `journals` table in token ranges, so Spark tasks can share a full scan.

Contract: `token_ranges(n)` splits Murmur3's token ring into `n` ranges `(low, high]` that
together cover every key exactly once; `journal_metas(store, low, high)` streams the journals
whose partition key `(topic, id)` falls in one range, page by page, with their metadata as
the store's read side returns it (`JournalMeta`), through the store's
`journals_in_token_range`; events are read through the store's `read`, the path every journal
read takes.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

from journal import JournalKey
from journal.store import CassandraStore, JournalMeta

TOKEN_MIN = -(2**63)  # Murmur3Partitioner's minimum: no key has it
TOKEN_MAX = 2**63 - 1


def token_ranges(count: int) -> list[tuple[int, int]]:
    """`count` ranges `(low, high]` of about equal width covering `(TOKEN_MIN, TOKEN_MAX]`."""
    count = max(1, count)
    width = (TOKEN_MAX - TOKEN_MIN) // count
    bounds = [TOKEN_MIN + i * width for i in range(count)] + [TOKEN_MAX]
    return list(itertools.pairwise(bounds))


async def journal_metas(
    store: CassandraStore, low: int, high: int, topic: str | None = None
) -> AsyncIterator[tuple[JournalKey, JournalMeta]]:
    """The journals (of `topic`, or of every topic) with `low < token(topic, id) <= high`."""
    async for key, meta in store.journals_in_token_range(low, high):
        if topic is None or key.topic == topic:
            yield key, meta
