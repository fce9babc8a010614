"""The API's routes, declared once.

`ROUTES` is the one list: the router (`web.app.add_routes`) registers it, the guard's table
of scopes (`web.auth.ROUTE_SCOPES`) and the paths of `/openapi.json` (`web.openapi`, which
describes each operation under its `operation_id`) are made from it. A route added here is
served, guarded and must be described, or `openapi_document` fails.

HEAD is not offered: a HEAD of a read would run the whole reading flow for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from web.grant import Scope

RouteKey = tuple[str, str]  # (method, the route's template as registered)

# which object's method serves a route: web.views.JournalViews, web.snapshots.SnapshotViews,
# web.ops.OpsViews (add_routes makes one of each)
Views = Literal["journals", "snapshots", "ops"]


@dataclass(frozen=True, slots=True)
class Route:
    """One route: what serves it, the scope a token needs for it (None: open to anyone), and
    its OpenAPI operationId. `lists_within_prefix`: a route without an {id} that filters what
    it answers by the token's prefix itself; any other route without an {id} refuses a
    prefix-limited token. `long_lived`: its answer lasts as long as the client wants (a live
    subscription), so its time says nothing of latency and is measured apart."""

    method: str
    path: str
    views: Views
    handler: str  # the name of the views' method
    scope: Scope | None
    operation_id: str
    lists_within_prefix: bool = False
    long_lived: bool = False

    @property
    def key(self) -> RouteKey:
        return (self.method, self.path)


ROUTES: tuple[Route, ...] = (
    # method, path, views, handler, scope, operation_id
    Route(
        "GET", "/journals", "journals", "ids", Scope.READ, "journalIds", lists_within_prefix=True
    ),
    Route("POST", "/journals/{id}/events", "journals", "append", Scope.WRITE, "append"),
    Route("GET", "/journals/{id}/events", "journals", "read", Scope.READ, "read"),
    Route("DELETE", "/journals/{id}/events", "journals", "delete", Scope.DELETE, "delete"),
    Route("GET", "/journals/{id}", "journals", "info", Scope.READ, "info"),
    Route("DELETE", "/journals/{id}", "journals", "purge", Scope.DELETE, "purge"),
    # crypto-shredding: the journal's data key destroyed, its rows purged (docs/erasure.md)
    Route("DELETE", "/journals/{id}/payloads", "journals", "erase", Scope.ERASE, "erase"),
    # every journal's events: a prefix-limited token gets those within its prefix
    Route(
        "GET",
        "/events",
        "journals",
        "subscribe",
        Scope.READ,
        "subscribe",
        lists_within_prefix=True,
        long_lived=True,
    ),
    # subscription groups: a member's stream, and acks to the worker that serves it; the
    # listing shows only the groups within the token's group prefix
    Route("GET", "/subscriptions", "journals", "groups", Scope.SUBSCRIBE, "subscriptionGroups"),
    Route(
        "GET",
        "/subscriptions/{group}/events",
        "journals",
        "group_events",
        Scope.SUBSCRIBE,
        "subscribeGroup",
        long_lived=True,
    ),
    Route(
        "POST", "/subscriptions/{group}/ack", "journals", "group_ack", Scope.SUBSCRIBE, "ackGroup"
    ),
    Route(
        "PUT", "/journals/{id}/snapshots/{seqNr}", "snapshots", "put", Scope.WRITE, "putSnapshot"
    ),
    Route(
        "GET",
        "/journals/{id}/snapshots/latest",
        "snapshots",
        "latest",
        Scope.READ,
        "latestSnapshot",
    ),
    Route(
        "DELETE",
        "/journals/{id}/snapshots",
        "snapshots",
        "delete_snapshots",
        Scope.DELETE,
        "deleteSnapshots",
    ),
    Route("GET", "/healthz", "ops", "healthz", None, "healthz"),
    Route("GET", "/readyz", "ops", "readyz", None, "readyz"),
    Route("GET", "/metrics", "ops", "metrics", Scope.ADMIN, "metrics"),
    Route("GET", "/status", "ops", "status", Scope.ADMIN, "status"),
    Route("GET", "/quarantine", "ops", "quarantine", Scope.ADMIN, "quarantine"),
    Route("GET", "/openapi.json", "ops", "openapi", None, "openapi"),
    # the operators' console: static files, open (the API behind them is not)
    Route("GET", "/ui", "ops", "console", None, "console"),
    Route("GET", "/ui/{file}", "ops", "console_file", None, "consoleFile"),
)
