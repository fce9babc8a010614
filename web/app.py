"""Assembling the HTTP API: `create_app` for a standalone server, `add_routes` to mount it.

    app = create_app(DirectBackend(journals))            # its own aiohttp Application
    add_routes(faust_web_app, backend)                   # onto an existing one, before startup

`add_routes` also installs the API's middlewares on the host application (JSON errors,
request metrics) unless told not to; they then apply to the host's other routes too, which is
what a single HTTP surface wants (a JSON 404 for every unknown path). Middlewares can only be
added before the application starts.
"""

from __future__ import annotations

from aiohttp import web

from journal.metrics import METRICS, Metrics
from web.backend import JournalBackend
from web.middleware import error_middleware, metrics_middleware
from web.ops import OpsViews
from web.views import JournalViews, Limits

DEFAULT_MAX_BODY_BYTES = 1_048_576
DEFAULT_RETRY_AFTER_S = 1


def add_routes(
    app: web.Application,
    backend: JournalBackend,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    retry_after_s: int = DEFAULT_RETRY_AFTER_S,
    middlewares: bool = True,
    metrics: Metrics = METRICS,
) -> None:
    """Mount the API's routes (and, with `middlewares`, its middlewares) on `app`; `metrics`
    is what the routes record and `/metrics` serves (a test passes its own)."""
    if max_body_bytes < 1 or retry_after_s < 0:
        raise ValueError("max_body_bytes must be positive and retry_after_s not negative")
    journals = JournalViews(backend, Limits(max_body_bytes, retry_after_s), metrics)
    ops = OpsViews(backend, retry_after_s, metrics)
    # HEAD is not offered: a HEAD of a read would run the whole reading flow for nothing
    app.router.add_routes(
        [
            web.get("/journals", journals.ids, allow_head=False),
            web.post("/journals/{id}/events", journals.append),
            web.get("/journals/{id}/events", journals.read, allow_head=False),
            web.delete("/journals/{id}/events", journals.delete),
            web.get("/journals/{id}", journals.info, allow_head=False),
            web.delete("/journals/{id}", journals.purge),
            web.get("/healthz", ops.healthz, allow_head=False),
            web.get("/readyz", ops.readyz, allow_head=False),
            web.get("/metrics", ops.metrics, allow_head=False),
            web.get("/openapi.json", ops.openapi, allow_head=False),
        ]
    )
    if middlewares:
        # metrics outermost, so it counts the status the error middleware finally chose
        app.middlewares.extend([metrics_middleware(metrics), error_middleware(retry_after_s)])


def create_app(
    backend: JournalBackend,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    retry_after_s: int = DEFAULT_RETRY_AFTER_S,
    metrics: Metrics = METRICS,
) -> web.Application:
    """A standalone aiohttp Application serving the API over `backend`."""
    # client_max_size only backs up web.body.read_body, which enforces max_body_bytes itself
    app = web.Application(client_max_size=max_body_bytes)
    add_routes(
        app, backend, max_body_bytes=max_body_bytes, retry_after_s=retry_after_s, metrics=metrics
    )
    return app
