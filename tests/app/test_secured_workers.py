"""Two workers with HTTP security on, against the real servers: who may read, write, delete.

Requests go to both workers, so each check is seen by an owner and by a worker that forwards;
a forwarded request is checked again by its owner, which trusts no other worker.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr
from yarl import URL

from app.forwarding import FORWARDED_HEADER
from app.http_tokens import minter_of
from journal.settings import HttpAuthSettings
from tests.support.harness import Harness, unique
from tests.support.http_api import journal_path
from tests.support.workers import WorkerProcess, running_workers, wait_settled
from web.auth import Scope, TokenMinter

pytestmark = pytest.mark.integration

APPEND = {"events": [{"seqNr": 1, "payload": {"a": 1}}]}


@dataclass
class Tokens:
    """Mints tokens the workers accept, and remembers each one to look for it in their logs."""

    minter: TokenMinter
    key: str
    minted: list[str] = field(default_factory=list)

    def __call__(self, *scopes: Scope, prefix: str | None = None, ttl_s: int = 300) -> str:
        token = self.minter.mint(scopes, prefix=prefix, ttl_s=ttl_s)
        self.minted.append(token)
        return token

    def header(self, *scopes: Scope, prefix: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self(*scopes, prefix=prefix)}"}


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "jwt.key"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def tokens(key_file: Path) -> Tokens:
    minter = minter_of(HttpAuthSettings(jwt_key_file=key_file))
    return Tokens(minter, key_file.read_text())


@pytest.fixture(scope="module")
def workers(
    connected: Harness, key_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[WorkerProcess]]:
    env = {"KJ_HTTP_SECURITY": "on", "KJ_JWT_KEY_FILE": str(key_file)}
    with running_workers(connected.settings, tmp_path_factory, env=env) as both:
        yield both


@pytest.fixture(scope="module")
async def session(workers: list[WorkerProcess]) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(scope="module")
async def urls(workers: list[WorkerProcess], tokens: Tokens) -> list[URL]:
    """The workers' URLs once they have split the partitions: one forwards to the other."""
    await wait_settled(workers, tokens.header(Scope.ADMIN))
    return [worker.url for worker in workers]


async def forwarded_total(session: aiohttp.ClientSession, url: URL, tokens: Tokens) -> float:
    status, body, _ = await call(session, "GET", url / "metrics", tokens.header(Scope.ADMIN))
    assert status == 200, body
    lines = body.decode().splitlines()
    name = "kafka_journal_forwarded_requests_total"
    return sum(float(line.split()[-1]) for line in lines if line.startswith(name))


async def call(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    headers: dict[str, str] | None = None,
    json: object = None,
) -> tuple[int, bytes, str]:
    """(status, body, WWW-Authenticate) of one request."""
    async with session.request(method, url, headers=headers, json=json) as response:
        return response.status, await response.read(), response.headers.get("WWW-Authenticate", "")


def at(url: URL, path: str) -> URL:
    path, _, query = path.partition("?")
    return url.with_path(path, encoded=True).with_query(query or None)


async def test_without_a_token_journals_answer_401_with_a_challenge(
    session: aiohttp.ClientSession, urls: list[URL]
) -> None:
    for url in urls:
        for method, path in (("GET", "/events"), ("POST", "/events"), ("DELETE", "")):
            target = at(url, journal_path("j-1", path))
            status, body, challenge = await call(session, method, target, json=APPEND)
            assert status == 401 and b'"code":"unauthorized"' in body, (url, method, path)
            assert challenge.startswith("Bearer ")


async def test_a_forged_or_expired_token_is_401(
    session: aiohttp.ClientSession, urls: list[URL], tokens: Tokens
) -> None:
    other = minter_of(HttpAuthSettings(jwt_key=SecretStr(secrets.token_hex(32))))
    forged = other.mint(list(Scope))
    expired = tokens.minter.mint(list(Scope), now=time.time() - 600, ttl_s=60)
    tokens.minted += [forged, expired]
    for url in urls:
        for token in (forged, expired):
            status, _, challenge = await call(
                session, "GET", at(url, journal_path("j-1")), {"Authorization": f"Bearer {token}"}
            )
            assert status == 401 and 'error="invalid_token"' in challenge


async def test_a_read_token_cannot_append_and_a_write_token_cannot_delete(
    session: aiohttp.ClientSession, urls: list[URL], tokens: Tokens
) -> None:
    journal_id = unique("rights")
    events = at(urls[0], journal_path(journal_id, "/events"))
    read = tokens.header(Scope.READ)
    for url in urls:
        status, body, challenge = await call(
            session, "POST", at(url, journal_path(journal_id, "/events")), read, APPEND
        )
        assert status == 403 and b'"code":"forbidden"' in body
        assert 'scope="journal:write"' in challenge
    assert (await call(session, "POST", events, tokens.header(Scope.WRITE), APPEND))[0] == 200
    reading = await call(session, "GET", at(urls[1], journal_path(journal_id, "/events")), read)
    assert reading[0] == 200 and reading[1].count(b"\n") == 1
    write = tokens.header(Scope.WRITE, Scope.READ)
    delete = tokens.header(Scope.DELETE)
    for path in (journal_path(journal_id, "/events?to=1"), journal_path(journal_id)):
        for url in urls:
            assert (await call(session, "DELETE", at(url, path), write))[0] == 403, (url, path)
        assert (await call(session, "DELETE", at(urls[1], path), delete))[0] == 200, path


async def test_a_prefix_token_reads_its_journals_only(
    session: aiohttp.ClientSession, urls: list[URL], tokens: Tokens
) -> None:
    a_id, b_id = unique("a-"), unique("b-")
    writer = tokens.header(Scope.WRITE)
    for journal_id in (a_id, b_id):
        target = at(urls[0], journal_path(journal_id, "/events"))
        assert (await call(session, "POST", target, writer, APPEND))[0] == 200
    limited = tokens.header(Scope.READ, prefix="a-")
    for url in urls:
        status, body, _ = await call(
            session, "GET", at(url, journal_path(a_id, "/events")), limited
        )
        assert status == 200 and body.count(b"\n") == 1
        status, body, _ = await call(
            session, "GET", at(url, journal_path(b_id, "/events")), limited
        )
        assert status == 403 and b"'a-'" in body


async def test_metrics_needs_admin_and_health_is_open(
    session: aiohttp.ClientSession, urls: list[URL], tokens: Tokens
) -> None:
    for url in urls:
        assert (await call(session, "GET", url / "metrics", tokens.header(Scope.READ)))[0] == 403
        status, body, _ = await call(session, "GET", url / "metrics", tokens.header(Scope.ADMIN))
        assert status == 200 and b"kafka_journal_http_requests_total" in body
        for path in ("healthz", "readyz", "openapi.json"):
            assert (await call(session, "GET", url / path))[0] == 200, path


async def test_a_forwarded_request_keeps_the_callers_authority_and_the_owner_checks_it(
    session: aiohttp.ClientSession, urls: list[URL], tokens: Tokens
) -> None:
    before = [await forwarded_total(session, url, tokens) for url in urls]
    writer = tokens.header(Scope.WRITE)
    for n in range(6):  # both workers, several partitions: some requests must be forwarded
        journal_id = unique(f"fwd{n}")
        for url in urls:
            target = at(url, journal_path(journal_id, "/events"))
            first = {"events": [{"seqNr": 1 if url == urls[0] else 2, "payload": n}]}
            status, body, _ = await call(session, "POST", target, writer, first)
            assert status == 200, body
    after = [await forwarded_total(session, url, tokens) for url in urls]
    assert sum(after) > sum(before), "no append was forwarded: the test proves nothing"
    # A request that says it was forwarded is still checked: the owner (whoever receives one
    # marked so serves it itself) trusts no worker, only the caller's token.
    journal_id = unique("fwd-marked")
    for url in urls:
        target = at(url, journal_path(journal_id, "/events"))
        marked = {FORWARDED_HEADER: "1"}
        read = {**marked, **tokens.header(Scope.READ)}
        assert (await call(session, "POST", target, read, APPEND))[0] == 403
        assert (await call(session, "POST", target, marked, APPEND))[0] == 401
        status, body, _ = await call(session, "GET", target, read)
        assert (status, body) == (200, b"")  # nothing was appended by either


async def test_no_secret_in_any_log_line_or_answer(
    session: aiohttp.ClientSession,
    urls: list[URL],
    tokens: Tokens,
    workers: list[WorkerProcess],
) -> None:
    # requests of every outcome on both workers (the module's other tests add theirs): answered,
    # forwarded, refused 401 and 403; then neither the logs nor the answers hold a token or key
    journal_id = unique("a-secret")
    outcomes = [
        ("POST", journal_path(journal_id, "/events"), tokens.header(Scope.WRITE), 200),
        ("GET", journal_path(journal_id, "/events"), tokens.header(Scope.READ), 200),
        ("POST", journal_path(journal_id, "/events"), tokens.header(Scope.READ), 403),
        ("GET", journal_path("b-1"), tokens.header(Scope.READ, prefix="a-"), 403),
        ("GET", journal_path(journal_id), {"Authorization": f"Bearer {tokens(Scope.READ)}x"}, 401),
        ("GET", "/metrics", tokens.header(Scope.ADMIN), 200),
    ]
    for url in urls:
        for n, (method, path, headers, expected) in enumerate(outcomes):
            first = {"events": [{"seqNr": 1 + urls.index(url), "payload": n}]}
            status, body, challenge = await call(session, method, at(url, path), headers, first)
            assert status == expected, (url, method, path, body)
            for token in tokens.minted:
                assert token.encode() not in body and token not in challenge
                assert token.rsplit(".", 1)[-1].encode() not in body
            assert tokens.key.encode() not in body
    for worker in workers:
        text = worker.log.read_text(errors="replace")
        assert "worker ready" in text, "not the log of a running worker"
        assert "kafka-journal token --scope" in text  # its welcome says how to get a token
        for secret in (*tokens.minted, tokens.key):
            assert secret not in text, f"a secret is in {worker.log}"
        # a JWT's signature alone is a secret's fingerprint too
        for token in tokens.minted:
            assert token.rsplit(".", 1)[-1] not in text
