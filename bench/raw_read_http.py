"""The raw baselines of reading a journal: its `event_records` rows SELECTed with the driver
alone (each row's value, the Append's events as Kafka holds them, decoded by orjson), the same
with the two other requests a complete read makes, and a minimal HTTP server writing the events
as NDJSON.

`RawReads` runs the store's own read statement (`Statements.read_records`, paged at its fetch
size) on a session of its own, one page at a time: no journal row, pointer, fence or head, no
`EventRecord`s. `RawCompleteReads` adds, in parallel with those pages, what any complete read
must also ask: the journal's row (the store's `Statements.meta`: deleteTo, the replicated
offset) and the partition's high watermark (a ListOffsets on an aiokafka consumer of its own);
no index, no fold. The server (`python -m bench.raw_read_http PORT TOPIC KEYSPACE`, Cassandra from
the `KJ_*` environment, run on uvloop as the worker is, in a child process so that its CPU is
not the load generator's) answers GET /journals/{id}/events with one NDJSON line per event (one
`orjson.dumps` each) and one write per page.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
import uvloop
from aiohttp import web
from aiokafka import AIOKafkaConsumer, TopicPartition
from cassandra.cluster import Cluster, ResponseFuture, Session
from cassandra.query import PreparedStatement

from bench.raw_http import serve_until_stopped, server_process
from journal.settings import Settings
from journal.store import ROWS_AS_TUPLES, Statements, open_session
from kjconfig.access import KafkaAccess

NDJSON = "application/x-ndjson"
# the driver's timestamps are naive UTC: written with a Z, as the API writes them
# an event as `RawReads.pages` yields it: a tuple of these fields (the payload decoded)
SEQ_NR, PARTITION, OFFSET, TIMESTAMP, TAGS, PAYLOAD = 0, 1, 2, 3, 4, 5
_LINE = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z


def _page(response: ResponseFuture) -> asyncio.Future[list[Any]]:
    """The page `response` is fetching, as an asyncio future (the driver's callbacks fire on
    its I/O thread)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[list[Any]] = loop.create_future()
    response.clear_callbacks()
    response.add_callbacks(
        lambda rows: loop.call_soon_threadsafe(future.set_result, list(rows or ())),
        lambda error: loop.call_soon_threadsafe(future.set_exception, error),
    )
    return future


class RawReads:
    """A journal's events (its `event_records` rows, decoded), page by page, and its
    `journals` row, on a driver session of its own."""

    def __init__(
        self,
        cluster: Cluster,
        session: Session,
        statement: PreparedStatement,
        meta: PreparedStatement,
    ) -> None:
        self._cluster = cluster
        self._session = session
        self._statement = statement
        self._meta = meta

    @classmethod
    async def connect(cls, settings: Settings) -> RawReads:
        """On the settings' Cassandra and keyspace, whose tables exist."""
        cluster, session = await open_session(settings.cassandra_config())
        # the store's statement, prepared as the store prepares it (fetch size included)
        statements = await asyncio.to_thread(Statements, session, settings.keyspace)
        return cls(cluster, session, statements.read_records, statements.meta)

    async def pages(self, topic: str, journal_id: str) -> AsyncIterator[list[Any]]:
        """The events of the journal's first segment (the bench's journals fit in one), a
        page of `event_records` rows at a time, each row's value decoded by orjson (payloads
        included: a raw read gives the caller every payload); the next page is asked for once
        this one is taken."""
        async for rows in self._rows(topic, journal_id):
            yield [
                (e["seqNr"], partition, offset, timestamp, e.get("tags", ()), e.get("payload"))
                for _, _, partition, offset, timestamp, _, value, _ in rows
                for e in orjson.loads(value)["events"]
            ]

    async def _rows(self, topic: str, journal_id: str) -> AsyncIterator[list[Any]]:
        params = (topic, journal_id, 0, 1)
        # rows as tuples, as the store asks them: the driver's named tuples cost a class per
        # page (~0.2 ms a 100-row page here), which a raw baseline must not pay
        response = self._session.execute_async(
            self._statement, params, execution_profile=ROWS_AS_TUPLES
        )
        while True:
            rows = await _page(response)
            yield rows
            if not response.has_more_pages:
                return
            response.start_fetching_next_page()

    async def row(self, topic: str, journal_id: str) -> Any | None:
        """The journal's row of `journals` (the store's statement, rows as tuples as the store
        asks them), if it has one."""
        response = self._session.execute_async(
            self._meta, (topic, journal_id), execution_profile=ROWS_AS_TUPLES
        )
        rows = await _page(response)
        return rows[0] if rows else None

    async def close(self) -> None:
        await asyncio.to_thread(self._cluster.shutdown)


class RawCompleteReads:
    """What any complete read must ask, in parallel and nothing more: a journal's `events` rows
    (`RawReads.pages`), its `journals` row, and its partition's high watermark (on an aiokafka
    consumer of its own, assigned to nothing)."""

    def __init__(self, reads: RawReads, consumer: AIOKafkaConsumer) -> None:
        self._reads = reads
        self._consumer = consumer

    @classmethod
    async def start(cls, reads: RawReads, kafka: KafkaAccess) -> RawCompleteReads:
        consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=None)
        await consumer.start()
        return cls(reads, consumer)

    async def read(
        self, topic: str, journal_id: str, partition: int
    ) -> tuple[list[Any], Any | None, int]:
        """The journal's event rows (all its first segment's), its row and the partition's high
        watermark."""
        tp = TopicPartition(topic, partition)

        async def rows() -> list[Any]:
            return [row async for page in self._reads.pages(topic, journal_id) for row in page]

        async def high_watermark() -> int:
            ends = await self._consumer.end_offsets([tp])
            end: int = ends[tp]
            return end

        events, row, end = await asyncio.gather(
            rows(), self._reads.row(topic, journal_id), high_watermark()
        )
        return events, row, end

    async def stop(self) -> None:
        """Stops its consumer (not the session of `reads`)."""
        await self._consumer.stop()


def line(row: Any) -> bytes:
    """An event of `RawReads.pages` as one NDJSON line: the fields of the API's line that
    the store holds."""
    fields = {
        "seqNr": row[SEQ_NR],
        "payload": row[PAYLOAD],
        "tags": row[TAGS],
        "timestamp": row[TIMESTAMP],
        "partition": row[PARTITION],
        "offset": row[OFFSET],
    }
    return orjson.dumps(fields, option=_LINE)


async def serve(port: int, topic: str, keyspace: str) -> None:
    reads = await RawReads.connect(Settings.from_env(keyspace=keyspace))

    async def read(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = NDJSON
        await response.prepare(request)
        async for page in reads.pages(topic, request.match_info["id"]):
            await response.write(b"".join([line(row) for row in page]))
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/journals/{id}/events", read)
    try:
        await serve_until_stopped(app, port)
    finally:
        await reads.close()


def raw_read_server(settings: Settings, port: int) -> AbstractAsyncContextManager[int]:
    """The raw HTTP read server on the settings' topic and keyspace, as a child process, ready;
    yields its pid. Its Cassandra login, if any, comes from the environment."""
    env = {
        "KJ_CASSANDRA_HOSTS": settings.cassandra_hosts,
        "KJ_CASSANDRA_PORT": str(settings.cassandra_port),
    }
    args = [str(port), settings.topic, settings.keyspace]
    return server_process("bench.raw_read_http", args, env)


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
