"""A page of `journal_ids`: one slice query per bucket of the topic's current generation
(`schema.py` says why; journal/core/listing.py), each streamed a few rows at a time, merged
in id order. A page of n ids reads about n + buckets * `_IDS_FETCH` rows."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator, Sequence
from typing import Any

from cassandra.cluster import Session

from journal.core.listing import bucket_numbers
from journal.store import cql
from journal.store.statements import Statements

_IDS_FETCH = 16  # rows per page of one bucket's slice: a page of ids spreads over all buckets


async def journal_ids(
    session: Session,
    statements: Statements,
    topic: str,
    buckets: int,
    prefix: str,
    after: str | None,
    limit: int,
) -> list[str]:
    """`EventualJournal.journal_ids` over the generation of `buckets`: up to `limit` ids
    starting with `prefix`, above `after`."""
    if limit <= 0:
        return []
    above = after is not None and after >= prefix  # else every id >= prefix is above it
    lower = after if above and after is not None else prefix
    upper = _successor(prefix)
    statement = statements.ids(above, upper is not None)
    fetch = min(_IDS_FETCH, limit + 1)
    streams: list[AsyncIterator[Any]] = []
    for bucket in bucket_numbers(buckets):
        values = (topic, bucket, lower) if upper is None else (topic, bucket, lower, upper)
        bound = statement.bind(values)
        bound.fetch_size = fetch
        streams.append(aiter(cql.stream(session, bound)))
    try:
        return await _merged(streams, limit)
    finally:
        for stream in streams:
            await stream.aclose()  # type: ignore[attr-defined]


def _successor(prefix: str) -> str | None:
    """The least string above every string starting with `prefix` (None: there is none).

    Code point order is UTF-8 byte order, Cassandra's order of text."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop()) + 1
        if last == 0xD800:
            last = 0xE000  # surrogates are not text
        if last <= 0x10FFFF:
            return "".join(chars) + chr(last)
    return None


async def _merged(streams: Sequence[AsyncIterator[Any]], limit: int) -> list[str]:
    """The first `limit` ids of ascending streams of rows, merged (each id is in one)."""
    firsts = await asyncio.gather(*(anext(stream, None) for stream in streams))
    heap = [(row.id, i) for i, row in enumerate(firsts) if row is not None]
    heapq.heapify(heap)
    ids: list[str] = []
    while heap and len(ids) < limit:
        journal_id, i = heap[0]
        ids.append(journal_id)
        row = await anext(streams[i], None)
        if row is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (row.id, i))
    return ids
