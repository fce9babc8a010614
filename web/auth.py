"""Who may do what over HTTP: bearer tokens (JWT), their scopes, and the route table.

A token is a JWT (RFC 7519) signed with the one configured algorithm, carrying `exp` and the
OAuth `scope` claim (space-separated, RFC 8693/9068) and optionally a prefix claim
(`journal_prefix` by default) that limits it to journal ids starting with its value, and a
group prefix claim (`group_prefix` by default) that limits it to the subscription groups whose
name starts with its value. PyJWT verifies signatures and the registered claims; nothing here
is cryptography.

`ROUTE_SCOPES` says which scope each route needs (None: open), as `web.routes.ROUTES`
declares it; a route missing from it (one a host application added) needs `journal:admin`.
`Guard.middleware` enforces it, on every worker a request passes through, forwarded ones
included: the owner checks the caller's token again, it never trusts the worker that
forwarded it.

Answers: 401 + `WWW-Authenticate: Bearer ...` (RFC 6750) without a token or with a bad,
expired or foreign one; 403 for a missing scope, a journal id outside the token's prefix or a
group outside its group prefix.
A prefix-limited token lists journal ids (GET /journals) and subscribes (GET /events) within
its prefix only (`web.grant.listing_prefix`), and is refused by the other routes that span
every journal (/metrics, /status, the subscription groups: a member gets every journal's
events). The groups' routes need `journal:subscribe` (joining a group takes partitions from
its members, and acks move its checkpoint: more than reading); `GET /subscriptions` lists only
the groups within the token's group prefix.
Messages never repeat the token.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from aiohttp import web
from aiohttp.typedefs import Handler

from web.error_answers import ApiError, ErrorCode
from web.grant import GRANT_KEY as GRANT_KEY
from web.grant import Grant as Grant
from web.grant import Scope as Scope
from web.routes import ROUTES, RouteKey
from web.views import journal_id_of

log = logging.getLogger(__name__)

REALM = "kafka-journal"


# Which scope each route needs (None: open), from the one route table.
ROUTE_SCOPES: Mapping[RouteKey, Scope | None] = {route.key: route.scope for route in ROUTES}
# Routes without an {id} that filter what they answer by the token's prefix themselves (from
# request[GRANT_KEY]); any other route without an {id} refuses a prefix-limited token.
PREFIX_FILTERING_ROUTES: frozenset[RouteKey] = frozenset(
    route.key for route in ROUTES if route.lists_within_prefix
)
METRICS_ROUTE: RouteKey = ("GET", "/metrics")


def required_scope(
    route: RouteKey, scopes: Mapping[RouteKey, Scope | None] = ROUTE_SCOPES
) -> Scope | None:
    """The scope `route` needs: its entry, else admin (an unlisted route is closed)."""
    return scopes.get(route, Scope.ADMIN)


class InvalidToken(Exception):
    """The token cannot be trusted; the message says why without quoting it."""


# Our words for PyJWT's failures: its own messages are fine too, but these name the fix.
_REASONS: tuple[tuple[type[jwt.InvalidTokenError], str], ...] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet (nbf/iat in the future)"),
    (jwt.InvalidSignatureError, "the token's signature does not verify with this server's key"),
    (jwt.InvalidAlgorithmError, "the token is not signed with this server's algorithm"),
    (jwt.InvalidAudienceError, "the token is not for this audience"),
    (jwt.InvalidIssuerError, "the token is not from the expected issuer"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim"),
    (jwt.DecodeError, "the token is not a well-formed JWT"),
)


def _reason(error: jwt.InvalidTokenError) -> str:
    for kind, reason in _REASONS:
        if isinstance(error, kind):
            if isinstance(error, jwt.MissingRequiredClaimError):
                return f"{reason}: {error.claim}"
            return reason
    return f"the token is not valid ({type(error).__name__})"


@dataclass(frozen=True)
class TokenRules:
    """The claims every token is checked against, besides its signature."""

    algorithm: str
    issuer: str | None = None
    audience: str | None = None
    prefix_claim: str = "journal_prefix"
    group_prefix_claim: str = "group_prefix"


class TokenVerifier:
    """Checks tokens against one key or a JWKS (keys by `kid`)."""

    def __init__(
        self, rules: TokenRules, key: Any = None, jwks: jwt.PyJWKSet | None = None
    ) -> None:
        if (key is None) == (jwks is None):
            raise ValueError("a verifier needs exactly one of key and jwks")
        self._rules = rules
        self._key = key
        self._jwks = jwks

    def verify(self, token: str) -> Grant:
        """The grant of `token`; InvalidToken if it is not signed by our key, expired, not
        ours (iss, aud) or malformed."""
        rules = self._rules
        try:
            claims = jwt.decode(
                token,
                self._key_for(token),
                algorithms=[rules.algorithm],
                issuer=rules.issuer,
                audience=rules.audience,
                options={"require": ["exp"]},  # a token that never expires is refused
            )
        except jwt.InvalidTokenError as error:
            raise InvalidToken(_reason(error)) from None  # PyJWT's chain may quote the token
        scope, prefix = claims.get("scope", ""), claims.get(rules.prefix_claim)
        groups = claims.get(rules.group_prefix_claim)
        if not isinstance(scope, str):
            raise InvalidToken("the token's scope claim is not a space-separated string")
        for name, value in ((rules.prefix_claim, prefix), (rules.group_prefix_claim, groups)):
            if value is not None and not isinstance(value, str):
                raise InvalidToken(f"the token's {name} claim is not a string")
        return Grant(frozenset(scope.split()), prefix, groups)

    def _key_for(self, token: str) -> Any:
        if self._jwks is None:
            return self._key
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.InvalidTokenError as error:
            raise InvalidToken(_reason(error)) from None
        for jwk in self._jwks.keys:
            if jwk.key_id == kid:
                return jwk.key
        raise InvalidToken("the token's kid names no key of this server's JWKS")


class TokenMinter:
    """Signs tokens this deployment accepts (for `kafka-journal token` and local clients)."""

    def __init__(self, rules: TokenRules, signing_key: Any) -> None:
        self._rules = rules
        self._key = signing_key

    def mint(
        self,
        scopes: Iterable[str],
        *,
        prefix: str | None = None,
        group_prefix: str | None = None,
        ttl_s: int = 3600,
        subject: str = "kafka-journal",
        now: float | None = None,
    ) -> str:
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "sub": subject,
            "iat": issued,
            "exp": issued + ttl_s,
            "scope": " ".join(sorted(set(scopes))),
        }
        if prefix is not None:
            claims[self._rules.prefix_claim] = prefix
        if group_prefix is not None:
            claims[self._rules.group_prefix_claim] = group_prefix
        if self._rules.issuer is not None:
            claims["iss"] = self._rules.issuer
        if self._rules.audience is not None:
            claims["aud"] = self._rules.audience
        return jwt.encode(claims, self._key, algorithm=self._rules.algorithm)


def _bearer(request: web.Request) -> str | None:
    """The token of `Authorization: Bearer <token>`; None without the header."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    kind, _, token = header.strip().partition(" ")
    if kind.lower() != "bearer" or not token.strip():
        raise _unauthorized("the Authorization header is not 'Bearer <token>'", "invalid_request")
    return token.strip()


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _unauthorized(message: str, error: str | None = "invalid_token") -> ApiError:
    challenge = f'Bearer realm="{REALM}"'
    if error is not None:  # RFC 6750 3.1: no error code when no credentials were sent
        challenge += f', error="{error}", error_description="{_quoted(message)}"'
    return ApiError(401, ErrorCode.UNAUTHORIZED, message, {"WWW-Authenticate": challenge})


def _forbidden(message: str, scope: Scope | None = None) -> ApiError:
    headers = {}
    if scope is not None:
        headers["WWW-Authenticate"] = (
            f'Bearer realm="{REALM}", error="insufficient_scope", scope="{scope}", '
            f'error_description="{_quoted(message)}"'
        )
    return ApiError(403, ErrorCode.FORBIDDEN, message, headers)


class Guard:
    """The middleware that lets a request in only with a token that grants its route."""

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        metrics_open: bool = False,
        scopes: Mapping[RouteKey, Scope | None] = ROUTE_SCOPES,
    ) -> None:
        self._verifier = verifier
        self._scopes = {**scopes, METRICS_ROUTE: None} if metrics_open else dict(scopes)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        match = request.match_info
        resource = match.route.resource
        if match.http_exception is not None or resource is None:
            return await handler(request)  # no route: the 404/405 says nothing of journals
        route = (request.method, resource.canonical)
        scope = required_scope(route, self._scopes)
        if scope is None:
            return await handler(request)
        try:
            request[GRANT_KEY] = self._grant(request, route, scope)
        except ApiError as refused:
            # an audit trail of refusals: the route's template (no ids) and why, never the token
            log.info("refused %s %s: %d %s", *route, refused.status, refused.message)
            raise
        return await handler(request)

    def _grant(self, request: web.Request, route: RouteKey, scope: Scope) -> Grant:
        token = _bearer(request)
        if token is None:
            raise _unauthorized(f"{route[0]} {route[1]} needs a bearer token", error=None)
        try:
            grant = self._verifier.verify(token)
        except InvalidToken as error:
            raise _unauthorized(str(error)) from None
        if scope not in grant.scopes:
            raise _forbidden(f"{route[0]} {route[1]} needs the scope {scope}", scope)
        if grant.prefix is not None:
            self._check_prefix(request, route, grant)
        if "{group}" in route[1] and not grant.covers_group(request.match_info["group"]):
            raise _forbidden(
                f"this token is limited to subscription groups starting with {grant.group_prefix!r}"
            )
        return grant

    def _check_prefix(self, request: web.Request, route: RouteKey, grant: Grant) -> None:
        limited = f"this token is limited to journal ids starting with {grant.prefix!r}"
        if "{id}" not in route[1]:
            if route not in PREFIX_FILTERING_ROUTES:
                raise _forbidden(f"{limited}; {route[0]} {route[1]} spans every journal")
        elif not grant.covers(journal_id_of(request)):  # an invalid id: its 400
            raise _forbidden(limited)
