"""Bearer tokens over a fake backend (no servers): the token logic, the route table, the answers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping

import jwt
import orjson
import pytest
from aiohttp import web

from journal.metrics import Metrics
from journal.subscriptions.groups import EventPosition
from tests.support.fake_backend import APPEND, JOURNAL_REQUESTS, FakeBackend
from tests.support.http_api import journal_path
from tests.web.served import Served, serve
from web.app import add_routes, create_app
from web.auth import (
    ROUTE_SCOPES,
    Guard,
    InvalidToken,
    Scope,
    TokenMinter,
    TokenRules,
    TokenVerifier,
    required_scope,
)
from web.error_answers import ErrorCode

SECRET = b"a-test-secret-of-48-bytes-or-more-for-hs384-too!!"
RULES = TokenRules("HS256")
MINTER = TokenMinter(RULES, SECRET)
VERIFIER = TokenVerifier(RULES, key=SECRET)


def token(*scopes: Scope, prefix: str | None = None, ttl_s: int = 60) -> str:
    return MINTER.mint(scopes, prefix=prefix, ttl_s=ttl_s)


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


# --- the token logic --------------------------------------------------------------------------


def test_a_minted_token_grants_its_scopes_and_prefix() -> None:
    grant = VERIFIER.verify(token(Scope.READ, Scope.WRITE, prefix="a-"))
    assert grant.scopes == {"journal:read", "journal:write"} and grant.prefix == "a-"
    assert grant.covers("a-1") and not grant.covers("b-1")
    assert VERIFIER.verify(token(Scope.READ)).covers("anything")


@pytest.mark.parametrize(
    ("forged", "reason"),
    [
        (TokenMinter(RULES, b"another-secret-of-32-bytes-or-more").mint(["journal:read"]), "sig"),
        (MINTER.mint(["journal:read"], now=time.time() - 120, ttl_s=60), "expired"),
        (jwt.encode({"scope": "journal:read"}, SECRET, algorithm="HS256"), "exp"),  # no exp
        (jwt.encode({"scope": "journal:admin", "exp": 2**40}, "", algorithm="none"), "algo"),
        (jwt.encode({"scope": "journal:read", "exp": 2**40}, SECRET, "HS384"), "algo"),
        ("not.a.jwt", "well-formed"),
    ],
)
def test_tokens_not_signed_by_our_key_as_we_sign_them_are_refused(forged: str, reason: str) -> None:
    with pytest.raises(InvalidToken, match=reason) as refused:
        VERIFIER.verify(forged)
    assert forged not in str(refused.value)


def test_issuer_and_audience_are_checked_when_configured() -> None:
    rules = TokenRules("HS256", issuer="https://issuer", audience="journal")
    ours = TokenMinter(rules, SECRET).mint(["journal:read"])
    assert TokenVerifier(rules, key=SECRET).verify(ours).scopes == {"journal:read"}
    for other in (
        TokenRules("HS256", issuer="https://other", audience="journal"),
        TokenRules("HS256", issuer="https://issuer", audience="other"),
    ):
        with pytest.raises(InvalidToken):
            TokenVerifier(rules, key=SECRET).verify(
                TokenMinter(other, SECRET).mint(["journal:read"])
            )


def test_a_custom_prefix_claim_is_the_one_read() -> None:
    rules = TokenRules("HS256", prefix_claim="tenant")
    minted = TokenMinter(rules, SECRET).mint(["journal:read"], prefix="t1/")
    assert jwt.decode(minted, SECRET, algorithms=["HS256"])["tenant"] == "t1/"
    assert TokenVerifier(rules, key=SECRET).verify(minted).prefix == "t1/"
    assert VERIFIER.verify(minted).prefix is None  # journal_prefix: not given


def test_a_malformed_scope_or_prefix_claim_is_refused() -> None:
    for claims in ({"scope": ["journal:read"]}, {"scope": "journal:read", "journal_prefix": 1}):
        forged = jwt.encode({**claims, "exp": int(time.time()) + 60}, SECRET, "HS256")
        with pytest.raises(InvalidToken, match="claim"):
            VERIFIER.verify(forged)


def test_every_route_of_the_api_is_in_the_table_and_unlisted_ones_need_admin() -> None:
    app = web.Application()
    add_routes(app, FakeBackend(), middlewares=False)
    routes = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }
    assert routes == set(ROUTE_SCOPES)
    assert required_scope(("GET", "/operator/something")) == Scope.ADMIN
    assert {required_scope(r) for r in ROUTE_SCOPES if r[1].startswith("/journals")} == {
        Scope.READ,
        Scope.WRITE,
        Scope.DELETE,
        Scope.ERASE,
    }


# --- the answers ------------------------------------------------------------------------------


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    guard = Guard(VERIFIER)
    async with serve(create_app(FakeBackend(), metrics=Metrics(), guard=guard)) as served:
        yield served


async def status_of(
    served: Served,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    json: object = None,
) -> int:
    async with served.session.request(
        method,
        served.at(path),
        headers=headers,
        json=json,
    ) as response:
        await response.read()
        return response.status


async def error_of(
    served: Served,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    json: object = None,
) -> tuple[int, str, str, str]:
    """(status, error.code, error.message, WWW-Authenticate) of an error answer."""
    async with served.session.request(
        method,
        served.at(path),
        headers=headers,
        json=json,
    ) as response:
        body = await response.json()
        error = body["error"]
        assert set(error) == {"code", "message"}, body
        return (
            response.status,
            error["code"],
            error["message"],
            response.headers.get("WWW-Authenticate", ""),
        )


async def test_without_a_token_every_journal_route_is_401_with_a_bare_challenge(
    served: Served,
) -> None:
    for method, path, kwargs in [*JOURNAL_REQUESTS, ("GET", "/metrics", {})]:
        status, code, _, challenge = await error_of(served, method, path, json=kwargs.get("json"))
        assert (status, code) == (401, ErrorCode.UNAUTHORIZED), (method, path)
        assert challenge == 'Bearer realm="kafka-journal"'  # RFC 6750 3.1: no error code


async def test_a_bad_or_expired_token_is_401_invalid_token(served: Served) -> None:
    expired = MINTER.mint(list(Scope), now=time.time() - 120, ttl_s=60)
    foreign = TokenMinter(RULES, b"another-secret-of-32-bytes-or-more").mint(list(Scope))
    for headers in (bearer(expired), bearer(foreign), {"Authorization": "Basic dXNlcjpwdw=="}):
        status, code, message, challenge = await error_of(
            served, "GET", journal_path("j", "/events"), headers
        )
        assert (status, code) == (401, ErrorCode.UNAUTHORIZED)
        assert challenge.startswith('Bearer realm="kafka-journal", error="invalid_')
        assert expired not in message and foreign not in message and expired not in challenge


async def test_each_route_needs_its_scope(served: Served) -> None:
    needed = {
        ("POST", journal_path("j", "/events")): Scope.WRITE,
        ("GET", journal_path("j", "/events")): Scope.READ,
        ("GET", journal_path("j")): Scope.READ,
        ("DELETE", journal_path("j", "/events?to=1")): Scope.DELETE,
        ("DELETE", journal_path("j")): Scope.DELETE,
        ("DELETE", journal_path("j", "/payloads")): Scope.ERASE,
        ("PUT", journal_path("j", "/snapshots/1")): Scope.WRITE,
        ("GET", journal_path("j", "/snapshots/latest")): Scope.READ,
        ("DELETE", journal_path("j", "/snapshots?to=1")): Scope.DELETE,
        ("GET", "/journals"): Scope.READ,
    }
    for method, path, kwargs in JOURNAL_REQUESTS:
        scope = needed[(method, path)]
        others = [s for s in Scope if s != scope]  # every other right, admin included
        status, code, message, challenge = await error_of(
            served, method, path, bearer(token(*others)), json=kwargs.get("json")
        )
        assert (status, code) == (403, ErrorCode.FORBIDDEN), (method, path)
        assert scope in message and f'error="insufficient_scope", scope="{scope}"' in challenge
        assert (
            await status_of(served, method, path, bearer(token(scope)), json=kwargs.get("json"))
            == 200
        )


async def test_a_prefix_limits_the_token_to_its_journal_ids(served: Served) -> None:
    limited = bearer(token(Scope.READ, Scope.WRITE, prefix="a-"))
    assert (
        await status_of(
            served, "POST", journal_path("a-1", "/events"), limited, json=APPEND["json"]
        )
        == 200
    )
    assert await status_of(served, "GET", journal_path("a-1", "/events"), limited) == 200
    for method, path in (("GET", journal_path("b-1")), ("POST", journal_path("b-1", "/events"))):
        status, code, message, _ = await error_of(
            served, method, path, limited, json=APPEND["json"]
        )
        assert (status, code) == (403, ErrorCode.FORBIDDEN) and "'a-'" in message
    # a route that spans every journal refuses a limited token, even with the right scope
    status, _, _, _ = await error_of(
        served, "GET", "/metrics", bearer(token(Scope.ADMIN, prefix="a-"))
    )
    assert status == 403


async def test_a_prefix_limited_token_lists_only_the_ids_within_its_prefix(
    served: Served,
) -> None:
    writer = bearer(token(Scope.WRITE))
    for journal_id in ("a-1", "a-2", "ab", "b-1"):
        path = journal_path(journal_id, "/events")
        assert await status_of(served, "POST", path, writer, json=APPEND["json"]) == 200

    async def listed(query: str, headers: Mapping[str, str]) -> list[str]:
        async with served.session.get(served.at(f"/journals{query}"), headers=headers) as answer:
            assert answer.status == 200, await answer.text()
            ids: list[str] = (await answer.json())["journals"]
            return ids

    limited = bearer(token(Scope.READ, prefix="a-"))
    assert await listed("", bearer(token(Scope.READ))) == ["a-1", "a-2", "ab", "b-1"]
    assert await listed("", limited) == ["a-1", "a-2"]  # the token's prefix by default
    assert await listed("?prefix=", limited) == ["a-1", "a-2"]
    assert await listed("?prefix=a-2", limited) == ["a-2"]  # narrower: as asked
    for outside in ("a", "b-", "ab"):  # wider than the token's or beside it
        status, code, message, _ = await error_of(
            served, "GET", f"/journals?prefix={outside}", limited
        )
        assert (status, code) == (403, ErrorCode.FORBIDDEN) and "'a-'" in message, outside
    # a subscription: the events of the journals within the token's prefix only (issue 30)
    async with served.session.get(served.at("/events"), headers=limited) as answer:
        assert answer.status == 200, await answer.text()
        lines = [orjson.loads(line) for line in (await answer.text()).splitlines()]
    assert sorted({line["id"] for line in lines if "id" in line}) == ["a-1", "a-2"]
    status, code, _, _ = await error_of(served, "GET", "/events?prefix=b-", limited)
    assert (status, code) == (403, ErrorCode.FORBIDDEN)


async def test_metrics_needs_admin_and_ops_routes_stay_open(served: Served) -> None:
    assert await status_of(served, "GET", "/metrics", bearer(token(Scope.READ))) == 403
    assert await status_of(served, "GET", "/metrics", bearer(token(Scope.ADMIN))) == 200
    for path in ("/healthz", "/readyz", "/openapi.json"):
        assert await status_of(served, "GET", path) == 200, path
    # no route: the 404 says nothing about journals, so it needs no token
    assert (await error_of(served, "GET", "/nope"))[:2] == (404, ErrorCode.NOT_FOUND)


async def test_status_needs_admin_and_the_console_files_are_open(served: Served) -> None:
    assert await status_of(served, "GET", "/status") == 401
    assert await status_of(served, "GET", "/status", bearer(token(Scope.READ))) == 403
    limited_admin = bearer(token(Scope.ADMIN, prefix="a-"))
    assert await status_of(served, "GET", "/status", limited_admin) == 403  # spans every journal
    assert await status_of(served, "GET", "/status", bearer(token(Scope.ADMIN))) == 200
    for path in ("/ui", "/ui/app.js", "/ui/style.css", "/ui/index.html"):
        assert await status_of(served, "GET", path) == 200, path


async def test_quarantine_needs_admin_over_every_journal(served: Served) -> None:
    assert await status_of(served, "GET", "/quarantine") == 401
    assert await status_of(served, "GET", "/quarantine", bearer(token(Scope.READ))) == 403
    limited_admin = bearer(token(Scope.ADMIN, prefix="a-"))
    assert await status_of(served, "GET", "/quarantine", limited_admin) == 403
    assert await status_of(served, "GET", "/quarantine", bearer(token(Scope.ADMIN))) == 200


async def test_metrics_can_be_configured_open() -> None:
    app = create_app(FakeBackend(), metrics=Metrics(), guard=Guard(VERIFIER, metrics_open=True))
    async with serve(app) as served:
        assert await status_of(served, "GET", "/metrics") == 200
        assert await status_of(served, "GET", journal_path("j")) == 401


async def test_without_a_guard_everything_is_open_as_before() -> None:
    async with serve(create_app(FakeBackend(), metrics=Metrics())) as served:
        for method, path, kwargs in [*JOURNAL_REQUESTS, ("GET", "/metrics", {})]:
            assert await status_of(served, method, path, json=kwargs.get("json")) == 200, (
                method,
                path,
            )


# --- subscription groups (issue 38) -------------------------------------------------------------


async def test_a_read_token_cannot_join_a_group_nor_acknowledge_nor_list_them(
    served: Served,
) -> None:
    """Joining takes partitions from the group's members and an ack moves its checkpoint:
    reading journals does not grant that."""
    reader = bearer(token(Scope.READ, Scope.WRITE, Scope.DELETE, Scope.ADMIN))
    ack = {"positions": [EventPosition(0, 0, 0).encode()]}
    for method, path, body in (
        ("POST", "/subscriptions/billing/ack", ack),
        ("GET", "/subscriptions/billing/events", None),
        ("GET", "/subscriptions", None),
    ):
        status, code, _, challenge = await error_of(served, method, path, reader, json=body)
        assert (status, code) == (403, ErrorCode.FORBIDDEN), (method, path)
        assert 'scope="journal:subscribe"' in challenge
    subscriber = bearer(token(Scope.SUBSCRIBE))
    async with served.session.get(
        served.at("/subscriptions/billing/events"), headers=subscriber
    ) as answer:
        assert answer.status == 200, await answer.text()
    # past the guard: acknowledged (200), or 409 once the closed stream's member is gone
    assert await status_of(served, "POST", "/subscriptions/billing/ack", subscriber, ack) in {
        200,
        409,
    }


async def test_a_group_prefix_limits_the_groups_a_token_joins_acknowledges_and_lists() -> None:
    backend = FakeBackend()
    backend.group_acks.update({"billing-a": set(), "billing-b": set(), "audit": set()})
    app = create_app(backend, metrics=Metrics(), guard=Guard(VERIFIER))
    limited = bearer(MINTER.mint([Scope.SUBSCRIBE], group_prefix="billing-"))
    assert VERIFIER.verify(limited["Authorization"][7:]).group_prefix == "billing-"
    async with serve(app) as served:
        for method, path in (
            ("GET", "/subscriptions/audit/events"),
            ("POST", "/subscriptions/audit/ack"),
            ("GET", "/subscriptions/billing/events"),  # "billing" lies outside "billing-"
        ):
            status, code, message, _ = await error_of(
                served, method, path, limited, json={"positions": [EventPosition(0, 0, 0).encode()]}
            )
            assert (status, code) == (403, ErrorCode.FORBIDDEN), path
            assert "'billing-'" in message
        async with served.session.get(
            served.at("/subscriptions/billing-a/events"), headers=limited
        ) as answer:
            assert answer.status == 200, await answer.text()

        async def listed(headers: Mapping[str, str]) -> list[str]:
            async with served.session.get(served.at("/subscriptions"), headers=headers) as answer:
                assert answer.status == 200, await answer.text()
                return [group["name"] for group in (await answer.json())["groups"]]

        assert await listed(limited) == ["billing-a", "billing-b"]
        assert await listed(bearer(token(Scope.SUBSCRIBE))) == ["audit", "billing-a", "billing-b"]
        # a member gets every journal's events: a journal-prefix token is refused
        journal_limited = bearer(token(Scope.SUBSCRIBE, prefix="a-"))
        assert (
            await status_of(served, "GET", "/subscriptions/billing-a/events", journal_limited)
            == 403
        )


def test_a_malformed_group_prefix_claim_is_refused() -> None:
    forged = jwt.encode(
        {"scope": "journal:subscribe", "group_prefix": ["a"], "exp": int(time.time()) + 60},
        SECRET,
        "HS256",
    )
    with pytest.raises(InvalidToken, match="group_prefix claim"):
        VERIFIER.verify(forged)
