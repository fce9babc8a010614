"""The per-journal HTTP model check: each journal has one client, which sends every request to
any of the workers it is given, so it knows what the journal holds after every answer: verified
appends (explicit seqNrs), appends at the end (with an Idempotency-Key, so a repeat is safe),
deletes, reads, snapshots written and read. Any answer but a 200 (or the 404 of a snapshot not
written yet) is wrong, and so is any read that differs from what the client was acknowledged.
Used by the Cassandra node faults (tests/cluster) and the TLS stack (tests/stack/test_tls.py).

A client with `retries` behaves as a client of dying workers must (tests/app/test_kill_loop.py):
a 503 with Retry-After is sent again after it, a broken connection after `RETRY_PAUSE_S`, to
either worker, until another answer comes; its verified appends carry an Idempotency-Key, so a
retry of one that took effect answers its 200. An operation's wait runs from its first send to
that answer, the retries' pauses included.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
import orjson
from yarl import URL

from tests.support.http_api import journal_path

OPERATION_BOUND_S = 60.0  # an operation still unanswered then is a hang: the run stops
RETRY_PAUSE_S = 0.2  # after a broken connection (no Retry-After to follow)
WEIGHTS = (30, 20, 30, 6, 7, 7)  # of `Client.run`'s steps, in its order


@dataclass(frozen=True)
class Served:
    """An operation's final answer: when it was first sent, how long it waited, through which
    worker (its port) the answer came."""

    sent: float
    waited: float
    method: str
    status: int
    port: int | None


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    # per operation: when it was sent and how long it took (all answered 200)
    timings: list[tuple[float, float]] = field(default_factory=list)
    served: list[Served] = field(default_factory=list)  # every operation answered


@dataclass
class Client:
    """The one client of a journal: what it acknowledged is what the journal holds."""

    session: aiohttp.ClientSession
    urls: list[URL]
    tally: Tally
    rng: random.Random
    journal_id: str
    last: int = 0
    delete_to: int = 0
    snapshot: int = 0  # the seqNr of the last snapshot written
    steps: int = 0
    retries: bool = False  # retry 503s and broken connections (see the module)

    async def call(
        self, method: str, path: str, body: bytes | None = None, **headers: str
    ) -> tuple[int, bytes]:
        """A request to either worker: its status and body; every status but 200 and an
        expected 404 is wrong, a broken connection too, unless `retries` (then sent again)."""
        base, _, query = path.partition("?")
        sent = time.monotonic()
        while True:
            url = self.rng.choice(self.urls).with_path(base, encoded=True).with_query(query)
            left = sent + OPERATION_BOUND_S - time.monotonic()
            try:
                async with asyncio.timeout(left):
                    async with self.session.request(method, url, data=body, headers=headers) as got:
                        content = await got.read()
            except aiohttp.ClientError as error:
                if not self.retries:
                    self.tally.wrong.append(f"{method} {path}: {error!r}")
                    return 0, b""
                self.tally.answers[f"{method} {type(error).__name__}"] += 1
                await asyncio.sleep(min(RETRY_PAUSE_S, max(left, 0)))
                continue
            except TimeoutError:
                self.tally.wrong.append(f"{method} {path}: unanswered in {OPERATION_BOUND_S} s")
                return 0, b""
            self.tally.answers[f"{method} {got.status}"] += 1
            retry_after = got.headers.get("Retry-After")
            if not (self.retries and got.status == 503 and retry_after is not None):
                break
            await asyncio.sleep(min(float(retry_after), max(left, 0)))
        waited = time.monotonic() - sent
        self.tally.served.append(Served(sent, waited, method, got.status, url.port))
        if got.status == 200:
            self.tally.timings.append((sent, waited))
        elif got.status != 404:
            self.tally.wrong.append(f"{got.status} {method} {path}: {content[:300]!r}")
        return got.status, content

    async def append_verified(self) -> None:
        first, count = self.last + 1, self.rng.randint(1, 3)
        events = [{"seqNr": n, "payload": {"n": n}} for n in range(first, first + count)]
        path = journal_path(self.journal_id, "/events")
        # retried, the key makes a repeat of one that took effect answer its 200 (not a 409)
        key = {"Idempotency-Key": f"{self.journal_id}-from-{first}"} if self.retries else {}
        status, _ = await self.call("POST", path, orjson.dumps({"events": events}), **key)
        if status == 200:
            self.last += count

    async def append_at_end(self) -> None:
        self.steps += 1
        body = orjson.dumps({"events": [{"payload": {"step": self.steps}}]})
        key = f"{self.journal_id}-{self.steps}"
        path = journal_path(self.journal_id, "/events")
        status, content = await self.call("POST", path, body, **{"Idempotency-Key": key})
        if status == 200:
            to = orjson.loads(content)["seqNr"]["to"]
            if to != self.last + 1:
                self.tally.wrong.append(
                    f"{self.journal_id}: at the end got {to}, not {self.last + 1}"
                )
            self.last = to

    async def delete(self) -> None:
        to = max(1, self.last - self.rng.randint(0, 3))
        path = journal_path(self.journal_id, f"/events?to={to}")
        status, content = await self.call("DELETE", path)
        if status == 200:
            expected = max(self.delete_to, min(to, self.last))
            got = orjson.loads(content)["deleteTo"] or 0
            if got != expected:
                self.tally.wrong.append(f"{self.journal_id}: deleteTo {got}, not {expected}")
            self.delete_to = max(self.delete_to, got)

    async def read(self) -> None:
        status, content = await self.call("GET", journal_path(self.journal_id, "/events"))
        if status == 200:
            got = [orjson.loads(line)["seqNr"] for line in content.splitlines()]
            if got != list(range(self.delete_to + 1, self.last + 1)):
                self.tally.wrong.append(
                    f"read {self.journal_id}: {got}, not {self.delete_to + 1}..{self.last}"
                )

    async def put_snapshot(self) -> None:
        if self.last == 0:
            return
        path = journal_path(self.journal_id, f"/snapshots/{self.last}")
        body = orjson.dumps({"payload": {"at": self.last}})
        status, _ = await self.call("PUT", path, body)
        if status == 200:
            self.snapshot = self.last

    async def latest_snapshot(self) -> None:
        status, content = await self.call("GET", journal_path(self.journal_id, "/snapshots/latest"))
        got = orjson.loads(content)["seqNr"] if status == 200 else 0
        if status in (200, 404) and got != self.snapshot:
            self.tally.wrong.append(
                f"{self.journal_id}: latest snapshot {got}, not {self.snapshot}"
            )

    async def run(
        self,
        stop: asyncio.Event,
        operations: int | None = None,
        weights: Sequence[int] = WEIGHTS,
    ) -> None:
        """Random operations until `stop` is set or `operations` of them were sent, or one
        answer was wrong; `weights`: of the verified appends, appends at the end, reads,
        deletes, snapshots written and read."""
        steps = [self.append_verified, self.append_at_end, self.read, self.delete]
        steps += [self.put_snapshot, self.latest_snapshot]
        sent = 0
        while not stop.is_set() and not self.tally.wrong and sent != operations:
            await self.rng.choices(steps, weights)[0]()
            sent += 1
