"""Faust workers as real processes for tests: start, wait until ready, stop, kill -9."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiokafka import AIOKafkaConsumer, TopicPartition
from yarl import URL

from journal.settings import Settings
from journal.store.base import EventualJournal, StoreUnavailable

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class WorkerProcess:
    """One `kafka-journal worker`; its log goes to `<datadir>.log`."""

    settings: Settings
    app_id: str
    datadir: Path
    port: int = field(default_factory=free_port)
    instance_id: str | None = None
    command: str = "worker"  # or "run": the stack (reused when up) and a worker
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> URL:
        return URL(f"http://127.0.0.1:{self.port}")

    @property
    def log(self) -> Path:
        return self.datadir.with_suffix(".log")

    def start(self) -> None:
        s = self.settings
        env = {
            **os.environ,
            "KJ_KAFKA_BOOTSTRAP": s.kafka_bootstrap,
            "KJ_CASSANDRA_HOSTS": s.cassandra_hosts,
            "KJ_CASSANDRA_PORT": str(s.cassandra_port),
            "KJ_TOPIC": s.topic,
            "KJ_KEYSPACE": s.keyspace,
            "KJ_PARTITIONS": str(s.partitions),
            "KJ_SEGMENT_SIZE": str(s.segment_size),
            "KJ_APP_ID": self.app_id,
        }
        command = [sys.executable, "-m", "app.cli", self.command, "--web-port", str(self.port)]
        command += ["--datadir", str(self.datadir), "--loglevel", "info"]
        if self.instance_id:
            command += ["--instance-id", self.instance_id]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    async def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Until /readyz answers 200 (assigned, recovered, connected)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        async with aiohttp.ClientSession() as session:
            while True:
                assert self.process is not None and self.process.poll() is None, self.tail()
                try:
                    async with session.get(self.url / "readyz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"worker on {self.port} not ready:\n{self.tail()}")
                await asyncio.sleep(0.3)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill9()

    def tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def wait_replicated(
    settings: Settings, store: EventualJournal, timeout_s: float = 90.0
) -> None:
    """Until the store's pointers reach the topic's current end: the agents replicated it."""
    ends = await end_offsets(settings.kafka_bootstrap, settings.topic, settings.partitions)
    deadline = asyncio.get_running_loop().time() + timeout_s
    pointers: dict[int, int] = {}
    while True:
        with contextlib.suppress(StoreUnavailable):  # e.g. reconnecting after an outage
            pointers = await store.pointers(settings.topic)
        if all(pointers.get(p, -1) >= end - 1 for p, end in ends.items()):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"replication stuck: pointers {pointers}, ends {ends}")
        await asyncio.sleep(0.1)
