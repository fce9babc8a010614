"""What a verified token allows (`web.auth` verifies it), as the views see it.

The guard puts the caller's Grant on the request (`GRANT_KEY`); a route that spans every
journal but filters what it answers by the token's prefix reads it from there, as the listing
of subscription groups does by the token's group prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from aiohttp import web

from web.error_answers import ApiError, ErrorCode


class Scope(StrEnum):
    """The OAuth scopes a token may carry; `web.routes` says which one each route needs."""

    READ = "journal:read"
    WRITE = "journal:write"
    DELETE = "journal:delete"  # delete and purge
    ADMIN = "journal:admin"  # metrics and operator routes
    # subscription groups: list them, join one's stream, acknowledge; apart from READ because
    # a member takes partitions from the group's others and its acks move the group's checkpoint
    SUBSCRIBE = "journal:subscribe"
    # erasure (docs/erasure.md): apart from DELETE because it cannot be undone, anywhere
    ERASE = "journal:erase"


@dataclass(frozen=True)
class Grant:
    """What a verified token allows."""

    scopes: frozenset[str]
    prefix: str | None  # None: every journal id
    group_prefix: str | None = None  # None: every subscription group

    def covers(self, journal_id: str) -> bool:
        return self.prefix is None or journal_id.startswith(self.prefix)

    def covers_group(self, name: str) -> bool:
        return self.group_prefix is None or name.startswith(self.group_prefix)


# request[GRANT_KEY]: the caller's Grant, for routes that filter what they answer by its prefix
GRANT_KEY = web.RequestKey("journal.grant", Grant)


def may_see_group(request: web.Request) -> Callable[[str], bool]:
    """Which subscription groups the caller's token may list and join (all without a guard)."""
    grant: Grant | None = request.get(GRANT_KEY)
    return (lambda _: True) if grant is None else grant.covers_group


def listing_prefix(request: web.Request, prefix: str) -> str:
    """The prefix a listing of journal ids uses: the request's, which must lie within the
    caller's token's prefix (403 otherwise); the token's when the request gave none."""
    grant: Grant | None = request.get(GRANT_KEY)
    if grant is None or grant.prefix is None:
        return prefix
    if not prefix:
        return grant.prefix
    if not prefix.startswith(grant.prefix):
        raise ApiError(
            403,
            ErrorCode.FORBIDDEN,
            f"this token is limited to journal ids starting with {grant.prefix!r}: "
            f"prefix {prefix[:100]!r} lies outside it",
        )
    return prefix
