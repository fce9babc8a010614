"""Where a run measures: the stack, fresh settings, a real worker process and its memory."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.common import unique
from journal.settings import Settings
from journal.store.base import EventualJournal

REPO = Path(__file__).resolve().parents[1]


def settings_for(base: Settings, prefix: str, partitions: int = 3) -> Settings:
    """`base` with a fresh topic and keyspace."""
    return replace(
        base,
        topic=unique(f"bench_{prefix}"),
        keyspace=unique(f"bench_{prefix}"),
        partitions=partitions,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Worker:
    """One `kafka-journal worker` process on `settings`; its log goes to `<datadir>.log`."""

    settings: Settings
    datadir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

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
            "KJ_APP_ID": unique("bench"),
        }
        command = [sys.executable, "-m", "app.cli", "worker", "--web-port", str(self.port)]
        command += ["--datadir", str(self.datadir), "--loglevel", "warning"]
        self.datadir.parent.mkdir(parents=True, exist_ok=True)
        with self.datadir.with_suffix(".log").open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    async def wait_ready(self, timeout_s: float = 180.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with aiohttp.ClientSession() as session:
            while True:
                if self.process is None or self.process.poll() is not None:
                    raise RuntimeError(f"the worker exited; see {self.datadir}.log")
                try:
                    async with session.get(f"{self.url}/readyz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if loop.time() > deadline:
                    raise TimeoutError(f"worker on {self.port} not ready in {timeout_s} s")
                await asyncio.sleep(0.2)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM of the worker, in KiB, from /proc/<pid>/status."""
        values: dict[str, int] = {}
        status = Path(f"/proc/{self.pid}/status").read_text()
        for line in status.splitlines():
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0])
        return values


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def replicated_to(
    store: EventualJournal, topic: str, ends: dict[int, int], timeout_s: float, poll_s: float = 0.05
) -> dict[int, int]:
    """Until the store's pointers reach `ends`; the pointers then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        pointers = await store.pointers(topic)
        if all(pointers.get(p, -1) >= end - 1 for p, end in ends.items() if end > 0):
            return pointers
        if loop.time() > deadline:
            raise TimeoutError(f"replication stuck: pointers {pointers}, ends {ends}")
        await asyncio.sleep(poll_s)
