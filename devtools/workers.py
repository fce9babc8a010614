"""Worker processes started from Python: for tests, benchmarks and tools that need real ones.

`WorkerProcess` runs `kafka-journal worker` (or `run`) as a child process with the settings it is
given, logs to `<datadir>.log`, and can wait until the worker is ready, stop it, or kill -9 it.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import environ
from pathlib import Path

import aiohttp
from yarl import URL

from journal.settings import Settings
from kjconfig.access import ClientTls

DEFAULT_MEMBERSHIP = "default"  # an `instance_id` that leaves the worker its own default
REPO = Path(__file__).resolve().parents[1]  # the checkout: workers run `python -m app.cli` in it


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tls_env(settings: Settings) -> dict[str, str]:
    """The settings' TLS to Kafka and Cassandra, for the worker to speak it as they do."""
    env = {"KJ_TLS": settings.tls, "KJ_SSL_CHECK_HOSTNAME": str(settings.ssl_check_hostname)}
    for variable, path in (
        ("KJ_KAFKA_SSL_CAFILE", settings.kafka_ssl_cafile),
        ("KJ_CASSANDRA_SSL_CAFILE", settings.cassandra_ssl_cafile),
    ):
        if path is not None:
            env[variable] = str(path)
    return env


@dataclass
class WorkerProcess:
    settings: Settings
    app_id: str  # the consumer group: workers with the same one share the partitions
    datadir: Path
    port: int = field(default_factory=free_port)
    # None: a dynamic member (KJ_STATIC_MEMBERSHIP=false), so that a worker stopped for good
    # hands its partitions over at once; "default": the worker's own default (static, its id
    # derived from host and port), as the README starts one; else this static member id
    instance_id: str | None = None
    command: str = "worker"  # or "run": the stack (reused when up) and a worker
    loglevel: str = "info"
    env: Mapping[str, str] = field(default_factory=dict)  # more KJ_* variables (security's)
    process: subprocess.Popen[bytes] | None = None

    @property
    def https(self) -> bool:
        """Whether it serves HTTPS: given a certificate (KJ_HTTP_SSL_CERTFILE) in `env`."""
        return bool(self.env.get("KJ_HTTP_SSL_CERTFILE"))

    @property
    def url(self) -> URL:
        return URL(f"{'https' if self.https else 'http'}://127.0.0.1:{self.port}")

    def http_ssl(self) -> ssl.SSLContext | bool:
        """What a client of its API verifies it with: the CA of KJ_HTTP_SSL_CAFILE in `env`
        (else the system's) over HTTPS, presenting the worker's own certificate when it asks
        for one (KJ_HTTP_SSL_CLIENT_CAFILE); aiohttp's default (True) otherwise."""
        if not self.https:
            return True
        ca = self.env.get("KJ_HTTP_SSL_CAFILE")
        mutual = bool(self.env.get("KJ_HTTP_SSL_CLIENT_CAFILE"))
        cert = Path(self.env["KJ_HTTP_SSL_CERTFILE"]) if mutual else None
        key = self.env.get("KJ_HTTP_SSL_KEYFILE") if mutual else None
        return ClientTls(
            None if ca is None else Path(ca), cert, None if key is None else Path(key)
        ).context()

    def http_connector(self) -> aiohttp.TCPConnector:
        return aiohttp.TCPConnector(ssl=self.http_ssl())

    @property
    def log(self) -> Path:
        return self.datadir.with_suffix(".log")

    @property
    def pid(self) -> int:
        assert self.process is not None, "start() first"
        return self.process.pid

    def start(self) -> None:
        s = self.settings
        env = {
            **environ,
            "KJ_KAFKA_BOOTSTRAP": s.kafka_bootstrap,
            "KJ_CASSANDRA_HOSTS": s.cassandra_hosts,
            "KJ_CASSANDRA_PORT": str(s.cassandra_port),
            "KJ_TOPIC": s.topic,
            "KJ_KEYSPACE": s.keyspace,
            "KJ_PARTITIONS": str(s.partitions),
            "KJ_SEGMENT_SIZE": str(s.segment_size),
            "KJ_KAFKA_ACK_TIMEOUT_S": str(s.kafka_ack_timeout_s),
            "KJ_APP_ID": self.app_id,
            "KJ_SECURITY": s.security,  # the worker's login then defaults as the settings' do
            **_tls_env(s),
            **self.env,
        }
        command = [sys.executable, "-m", "app.cli", self.command, "--http-port", str(self.port)]
        command += ["--worker-dir", str(self.datadir), "--loglevel", self.loglevel]
        if self.instance_id is None:
            env["KJ_STATIC_MEMBERSHIP"] = "false"
        elif self.instance_id != DEFAULT_MEMBERSHIP:
            command += ["--instance-id", self.instance_id]
        self.datadir.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    async def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Until /readyz answers 200 (assigned, recovered, connected)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with aiohttp.ClientSession(connector=self.http_connector()) as session:
            while True:
                if self.process is None or self.process.poll() is not None:
                    raise RuntimeError(f"the worker on {self.port} exited:\n{self.tail()}")
                try:
                    async with session.get(self.url / "readyz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if loop.time() > deadline:
                    raise TimeoutError(f"worker on {self.port} not ready:\n{self.tail()}")
                await asyncio.sleep(0.2)

    def kill9(self) -> None:
        assert self.process is not None, "start() first"
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

    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM (peak) of the worker, in KiB, from /proc/<pid>/status."""
        values: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0])
        return values
