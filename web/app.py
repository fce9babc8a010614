"""Assembling the HTTP API: `create_app` for a standalone server, `add_routes` to mount it.

    app = create_app(DirectBackend(journals))            # its own aiohttp Application
    add_routes(faust_web_app, backend)                   # onto an existing one, before startup

`add_routes` also installs the API's middlewares on the host application (request ids, JSON
errors, request metrics) unless told not to; they then apply to the host's other routes too,
which is what a single HTTP surface wants (a JSON 404 for every unknown path). Middlewares can
only be added before the application starts.
"""

from __future__ import annotations

from aiohttp import web

from journal.metrics import METRICS, Metrics
from journal.store import DEFAULT_MAX_SNAPSHOT_BYTES
from web.auth import Guard
from web.backend import JournalBackend
from web.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_GROUP_STREAMS,
    DEFAULT_RETRY_AFTER_S,
    Limits,
)
from web.middleware import error_middleware, metrics_middleware
from web.ops import OpsViews
from web.request_id import echo_request_id, request_id_middleware
from web.routes import ROUTES, Views
from web.snapshots import SnapshotViews, snapshot_body_limit
from web.views import JournalViews


def add_routes(
    app: web.Application,
    backend: JournalBackend,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    retry_after_s: int = DEFAULT_RETRY_AFTER_S,
    middlewares: bool = True,
    metrics: Metrics = METRICS,
    guard: Guard | None = None,
    max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES,
    max_group_streams: int = DEFAULT_MAX_GROUP_STREAMS,
) -> None:
    """Mount the API's routes (`web.routes.ROUTES`) and, with `middlewares`, its middlewares
    on `app`; `metrics` is what the routes record and `/metrics` serves (a test passes its
    own); `guard` checks bearer tokens (None: HTTP security off, every route open). A
    snapshot's PUT takes a body for a payload of `max_snapshot_bytes` (the store's limit),
    base64 included. At most `max_group_streams` group members' streams at once (503
    `group_streams_full` past it)."""
    if max_body_bytes < 1 or retry_after_s < 0 or max_group_streams < 1:
        raise ValueError(
            "max_body_bytes and max_group_streams must be positive, retry_after_s not negative"
        )
    limits = Limits(max_body_bytes, retry_after_s, max_group_streams)
    journals = JournalViews(backend, limits, metrics)
    snapshots = SnapshotViews(backend, limits, max_snapshot_bytes, metrics)
    ops = OpsViews(backend, retry_after_s, metrics)
    views: dict[Views, object] = {"journals": journals, "snapshots": snapshots, "ops": ops}
    for route in ROUTES:  # add_route, not add_get: no HEAD (see web.routes)
        app.router.add_route(route.method, route.path, getattr(views[route.views], route.handler))
    if middlewares:
        # the request id outermost, so every line logged for the request carries it; metrics
        # next, so it counts the status the error middleware finally chose
        long_lived = frozenset(route.path for route in ROUTES if route.long_lived)
        app.middlewares.extend(
            [
                request_id_middleware,
                metrics_middleware(metrics, long_lived),
                error_middleware(retry_after_s),
            ]
        )
        app.on_response_prepare.append(echo_request_id)
    if guard is not None:
        # inside the error middleware (its 401/403 get the API's body), before any middleware
        # added later, such as forwarding: a request is checked before it goes anywhere
        app.middlewares.append(guard.middleware)


def create_app(
    backend: JournalBackend,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    retry_after_s: int = DEFAULT_RETRY_AFTER_S,
    metrics: Metrics = METRICS,
    guard: Guard | None = None,
    max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES,
    max_group_streams: int = DEFAULT_MAX_GROUP_STREAMS,
) -> web.Application:
    """A standalone aiohttp Application serving the API over `backend`."""
    # client_max_size only backs up web.body.read_body, which enforces the limits itself
    app = web.Application(
        client_max_size=max(max_body_bytes, snapshot_body_limit(max_snapshot_bytes))
    )
    add_routes(
        app,
        backend,
        max_body_bytes=max_body_bytes,
        retry_after_s=retry_after_s,
        metrics=metrics,
        guard=guard,
        max_snapshot_bytes=max_snapshot_bytes,
        max_group_streams=max_group_streams,
    )
    return app
