"""The Cassandra store's reads: pointers, journal rows, a journal's events segment by segment
(and its first page, asked before its row is known), the stored Appends of a partition, and the
`journals` table by token range for the pipeline's scans."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Collection
from typing import Any

from cassandra.cluster import Session

from journal.codec.envelope import Opener
from journal.core.model import SEQ_NR_MAX, EventRecord, JournalKey
from journal.store import cql
from journal.store.base import FirstPage, JournalMeta, StoredAppend
from journal.store.cluster import ROWS_AS_TUPLES
from journal.store.rows import (
    EVENT_OFFSET,
    event_record_of,
    event_records_of,
    meta_of,
    records_events,
)
from journal.store.schema import APPEND_BUCKET
from journal.store.statements import (
    FIRST_CHUNK_ROWS,
    FIRST_EVENTS,
    READ_CHUNK_EVENTS,
    RECORDS_PAGE,
    Statements,
)

_POINTER_READS = 32  # pointers read at a time: one Cassandra partition each
_APPENDS_SLICE = 1_000  # offsets per query of `appends`: a page, where no row was removed
_KNOWN_DELETES = 10_000  # journals whose deleteTo a store keeps for first pages (~1 MB)


class Reads:
    """The read side on one session; `segment_size` is the store's for new journals."""

    def __init__(self, session: Session, statements: Statements, segment_size: int) -> None:
        self._session = session
        self._statements = statements
        self._segment_size = segment_size
        self._counts: dict[str, int] = {}
        # the deleteTo and records_from of journals whose rows were read lately, for
        # `first_page`, where either says more than "from 1": bounded
        self._known: OrderedDict[JournalKey, tuple[int, int]] = OrderedDict()

    async def pointer(self, topic: str, partition: int) -> int | None:
        rows = await cql.execute(
            self._session, self._statements.pointer, (topic, partition), ROWS_AS_TUPLES
        )
        return rows[0][0] if rows else None

    async def pointers(self, topic: str) -> dict[int, int]:
        """Each partition's pointer, one Cassandra partition at a time over the topic's
        recorded partition count; a topic without one (no process guarded it) from the
        version 2 table, which every save writes too, all of its pages."""
        count = await self._partition_count(topic)
        if count is None:
            rows = cql.stream(
                self._session, self._statements.legacy_pointers, (topic,), ROWS_AS_TUPLES
            )
            return {partition: offset async for partition, offset in rows}
        found: dict[int, int] = {}

        async def read(partition: int) -> None:
            offset = await self.pointer(topic, partition)
            if offset is not None:
                found[partition] = offset

        await cql.in_window(read, range(count), _POINTER_READS)
        return dict(sorted(found.items()))

    async def _partition_count(self, topic: str) -> int | None:
        """The topic's recorded partition count, kept once known: the guard refuses a
        change of it (journal/kafka/guard.py)."""
        count = self._counts.get(topic)
        if count is None:
            rows = await cql.execute(
                self._session, self._statements.partition_count, (topic,), ROWS_AS_TUPLES
            )
            count = rows[0][0] if rows else None
            if count is not None:
                self._counts[topic] = count
        return count

    async def meta(self, key: JournalKey) -> JournalMeta | None:
        row = await self._meta_row(key)
        meta = None if row is None else meta_of(row)
        self._note_delete_to(key, meta)
        return meta

    async def stored(self, keys: Collection[JournalKey]) -> dict[JournalKey, JournalMeta]:
        rows = await asyncio.gather(*(self._meta_row(key) for key in keys))
        return {key: meta_of(row) for key, row in zip(keys, rows, strict=True) if row is not None}

    async def read(
        self, key: JournalKey, meta: JournalMeta, from_: int = 1, to: int = SEQ_NR_MAX
    ) -> AsyncIterator[EventRecord]:
        async for page in self.read_pages(key, meta, from_, to):
            for record in page:
                yield record

    async def read_pages(
        self,
        key: JournalKey,
        meta: JournalMeta,
        from_: int = 1,
        to: int = SEQ_NR_MAX,
        opener: Opener | None = None,
    ) -> AsyncIterator[list[EventRecord]]:
        """`read`, a page of the driver's at a time: the events below the journal's
        `records_from` from version 3's `events`, the rest from `event_records`; with the
        `opener` of the journal's data key, opened as each row is decoded."""
        if meta.seq_nr is None:
            return
        size = meta.segment_size or self._segment_size
        start = max(from_, (meta.delete_to or 0) + 1)
        stop = min(to, meta.seq_nr)
        if start < meta.records_from:
            legacy_stop = min(stop, meta.records_from - 1)
            for segment in range(start // size, legacy_stop // size + 1):
                pages = cql.stream_pages(
                    self._session,
                    self._statements.read,
                    (key.topic, key.id, segment, start, legacy_stop),
                    ROWS_AS_TUPLES,
                    ahead=True,  # a long read's next page is read while this one is decoded
                )
                async for rows in pages:
                    if rows:
                        yield _opened(event_records_of(rows), opener)
            start = meta.records_from
        if start > stop:
            return
        # a row lives in the segment of its last seqNr, so the row holding `start` is the
        # first of its segment's slice from `start`, and the one holding `stop` may lie a
        # segment further than `stop`'s (an Append across a boundary); the journal's last
        # row ends at its last seqNr, so segments past that one's hold nothing to read
        per_row = float(READ_CHUNK_EVENTS // FIRST_CHUNK_ROWS)  # a first guess, at the large end
        for segment in range(start // size, max(stop, meta.seq_nr) // size + 1):
            chunks = self._record_chunks(key, segment, start, per_row)
            async for rows, seen in chunks:
                per_row = seen  # the next segment's first guess
                records = records_events(rows, start, stop, opener)
                if records:
                    yield records
                if rows[-1][0] >= stop or rows[-1][1] > stop:  # past `stop`: done
                    await chunks.aclose()  # its chunk read ahead, cancelled
                    return

    async def _record_chunks(
        self, key: JournalKey, segment: int, start: int, per_row: float
    ) -> AsyncGenerator[tuple[list[Any], float]]:
        """The segment's `event_records` rows from the one holding `start`, in chunks of about
        `READ_CHUNK_EVENTS` events (rows a chunk: by the events a row had so far, `per_row`,
        given with each chunk), the next chunk read while this one is taken."""

        def ask(first: int, estimate: float) -> asyncio.Future[tuple[list[Any], int]]:
            rows = max(1, min(RECORDS_PAGE, int(READ_CHUNK_EVENTS / estimate)))
            params = (key.topic, key.id, segment, first, rows)
            asked = cql.execute(
                self._session, self._statements.read_records, params, ROWS_AS_TUPLES
            )
            return asyncio.ensure_future(_with_asked(asked, rows))

        pending = ask(start, per_row)
        try:
            while True:
                rows, asked = await pending
                if not rows:
                    return
                per_row = max(1.0, sum(r[0] - r[1] + 1 for r in rows) / len(rows))
                more = len(rows) == asked  # fewer than asked: the segment's last rows
                if more:
                    pending = ask(rows[-1][0] + 1, per_row)
                yield rows, per_row
                if not more:
                    return
        finally:
            if not pending.done():
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)

    async def appends(
        self, topic: str, partition: int, after: int, to: int
    ) -> AsyncIterator[StoredAppend]:
        low = after + 1
        while low <= to:
            # a slice of offsets per query, within one bucket: the rows a Delete or Purge
            # removed are tombstones until compaction, and a query walks at most a slice of
            # them (Cassandra warns past 1,000 a query, fails past 100,000)
            bucket = low // APPEND_BUCKET
            high = min(to, low + _APPENDS_SLICE - 1, (bucket + 1) * APPEND_BUCKET - 1)
            rows = cql.stream(
                self._session,
                self._statements.appends,
                (topic, partition, bucket, low - 1, high),
                ROWS_AS_TUPLES,
            )
            low = high + 1
            async for offset, journal_id, first, last, segment_size in rows:
                yield StoredAppend(
                    JournalKey(topic, journal_id), partition, offset, first, last, segment_size
                )

    async def append_events(
        self, append: StoredAppend, opener: Opener | None = None
    ) -> AsyncIterator[EventRecord]:
        key, size = append.key, append.segment_size or self._segment_size
        # with the journal's row: a row holds its whole Append, and a Delete inside the
        # Append leaves it, so the events at or below deleteTo are left out here, as a read
        # leaves them (asked together: one round trip's wait)
        found, row = await asyncio.gather(
            cql.execute(
                self._session,
                self._statements.append_record,
                (key.topic, key.id, append.last // size, append.last),
                ROWS_AS_TUPLES,
            ),
            self._meta_row(key),
        )
        if found:  # one row per Append; not this one's if a later Append's after a Purge
            if found[0][3] == append.offset:
                delete_to = (None if row is None else meta_of(row).delete_to) or 0
                low = max(append.first, delete_to + 1)
                for record in records_events(found, low, append.last, opener):
                    yield record
            return
        # no row: an Append that version 3 stored, one row per event
        for segment in range(append.first // size, append.last // size + 1):
            rows = cql.stream(
                self._session,
                self._statements.read,
                (key.topic, key.id, segment, append.first, append.last),
                ROWS_AS_TUPLES,
            )
            async for event_row in rows:
                if event_row[EVENT_OFFSET] == append.offset:  # not a later Append's after a Purge
                    yield _opened([event_record_of(event_row)], opener)[0]

    async def first_page(
        self, key: JournalKey, from_: int, to: int, opener: Opener | None = None
    ) -> FirstPage:
        """From the journal's deleteTo + 1 as last seen here, if above `from_`: a slice from
        `from_` would walk every row a Delete shadowed in the segment (up to a segment's
        worth) until compaction drops them. A deleteTo seen before a Purge only makes the page
        start too high: the reader keeps only events that continue what it has. The rows of
        `from_`'s segment in `event_records` that end within `FIRST_EVENTS` seqNrs of it, or
        in `events` below the journal's `records_from` as last seen here (a journal version 3
        stored); where none ends in that segment, the next one's. A row holding `from_` is not
        in the page if it ends past that bound: the reader gets it from `read`."""
        delete_to, records_from = self._known.get(key, (0, 1))
        from_ = max(from_, delete_to + 1)
        size = self._segment_size
        segment_end = (from_ // size + 1) * size - 1
        if from_ < records_from:
            rows = await cql.execute(
                self._session,
                self._statements.read,
                (key.topic, key.id, from_ // size, from_, min(to, segment_end, records_from - 1)),
                ROWS_AS_TUPLES,
            )
            return FirstPage(size, tuple(_opened(event_records_of(rows), opener)))
        segment, high = from_ // size, from_ + FIRST_EVENTS - 1
        rows = await cql.execute(
            self._session,
            self._statements.first_records,
            (key.topic, key.id, segment, from_, min(segment_end, high)),
            ROWS_AS_TUPLES,
        )
        if not rows and high > segment_end:  # the row holding `from_` may end in the next one
            rows = await cql.execute(
                self._session,
                self._statements.first_records,
                (key.topic, key.id, segment + 1, from_, min(segment_end + size, high)),
                ROWS_AS_TUPLES,
            )
        return FirstPage(size, tuple(records_events(rows, from_, to, opener)))

    async def journals_in_token_range(
        self, low: int, high: int
    ) -> AsyncIterator[tuple[JournalKey, JournalMeta]]:
        """The rows of `journals` (every topic's) with `low < token(topic, id) <= high`,
        streamed page by page."""
        rows = cql.stream(
            self._session, self._statements.journals_in_token_range, (low, high), ROWS_AS_TUPLES
        )
        async for row in rows:
            yield JournalKey(row[0], row[1]), meta_of(row[2:])

    def _note_delete_to(self, key: JournalKey, meta: JournalMeta | None) -> None:
        delete_to = (None if meta is None else meta.delete_to) or 0
        records_from = 1 if meta is None else meta.records_from
        if not delete_to and records_from == 1:
            self._known.pop(key, None)
            return
        self._known[key] = (delete_to, records_from)
        self._known.move_to_end(key)
        if len(self._known) > _KNOWN_DELETES:
            self._known.popitem(last=False)

    async def _meta_row(self, key: JournalKey) -> tuple[Any, ...] | None:
        rows = await cql.execute(
            self._session, self._statements.meta, (key.topic, key.id), ROWS_AS_TUPLES
        )
        return rows[0] if rows else None


async def _with_asked(rows: Awaitable[list[Any]], asked: int) -> tuple[list[Any], int]:
    """`rows` and how many were asked (a chunk of fewer is the segment's last)."""
    return list(await rows), asked


def _opened(records: list[EventRecord], opener: Opener | None) -> list[EventRecord]:
    """Version 3's `events` rows, a payload a row: opened one by one (a version 1 envelope an
    event, sealed before version 2; never an Append's envelope)."""
    return records if opener is None else opener.records(records)
