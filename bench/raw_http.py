"""The raw HTTP baseline of the append benchmark: the least an HTTP service that acknowledges an
append once Kafka has it must do, and nothing of ours but the partitioner.

One aiohttp server, one idempotent acks=all AIOKafkaProducer with the writer's settings. A POST
of an append's body is parsed with orjson, its events re-encoded with orjson and produced to the
journal's partition of a topic of its own (no worker replicates it); the answer is the last
seqNr. No validation, no header codec, no fold, no replication, no tables. Run as a child process
(`python -m bench.raw_http PORT TOPIC PARTITIONS`, Kafka from the `KJ_*` environment) on
uvloop, as the worker runs, so that its CPU, like the worker's, is not the load generator's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import orjson
import uvloop
from aiohttp import web

from bench.workload import raw_producer
from journal.kafka import partition_of
from journal.settings import Settings

_APPEND_HEADERS = [("journal.action", b'{"type":"append"}')]


async def serve(port: int, topic: str, partitions: int) -> None:
    producer = raw_producer(Settings.from_env().kafka_access())
    await producer.start()

    async def append(request: web.Request) -> web.Response:
        journal_id = request.match_info["id"]
        events = orjson.loads(await request.read())["events"]
        await producer.send_and_wait(
            topic,
            orjson.dumps({"events": events}),
            key=journal_id.encode(),
            partition=partition_of(journal_id, partitions),
            headers=_APPEND_HEADERS,
        )
        body = orjson.dumps({"seqNr": events[-1]["seqNr"]})
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/journals/{id}/events", append)
    try:
        await serve_until_stopped(app, port)
    finally:
        await producer.stop()


async def serve_until_stopped(app: web.Application, port: int) -> None:
    """Serve `app` on 127.0.0.1:`port`, say "ready" (`server_process` waits for it), and
    serve until the process is stopped."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


@asynccontextmanager
async def server_process(module: str, args: list[str], env: dict[str, str]) -> AsyncIterator[int]:
    """`python -m module *args` (a baseline server printing "ready" once it listens) as a
    child process with `env` over this one's environment, ready; yields its pid."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=subprocess.PIPE,
        env={**os.environ, **env},
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"{module} did not start (exit {process.returncode})")
        yield process.pid
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


def raw_http_server(
    bootstrap: str, port: int, topic: str, partitions: int
) -> AbstractAsyncContextManager[int]:
    """The baseline server as a child process, ready; yields its pid. Its Kafka login, if any,
    comes from the environment, as the bench workers' do."""
    args = [str(port), topic, str(partitions)]
    return server_process("bench.raw_http", args, {"KJ_KAFKA_BOOTSTRAP": bootstrap})


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
