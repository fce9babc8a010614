"""Operational routes: liveness, readiness, metrics, status, the quarantine, the API's own
description, and the operators' console.

`/healthz` answers 200 while the process can answer at all, and does nothing else. `/readyz`
asks the backend whether this process can serve journal requests (a Faust worker: once its
core is connected, also while its group rebalances, as it serves or forwards requests then):
200 or 503 + Retry-After, so load balancers stop sending requests it would refuse anyway.

The console (`/ui`) is the static files of `web/ui/`, read once: a page that calls this API
with the operator's token, so it shows what any client of the API sees and can do no more.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
from aiohttp import web

from journal.metrics import CONTENT_TYPE, Metrics
from journal.replication import Quarantined
from web.backend import JournalBackend
from web.error_answers import ErrorCode
from web.failures import unavailable
from web.openapi import openapi_document
from web.representation import iso_timestamp, json_response
from web.schema import QuarantinedOut, QuarantineOut, Status
from web.status import worker_status
from web.validation import parse_quarantine_limit

CONSOLE_DIR = Path(__file__).parent / "ui"
_CONSOLE_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
}
# the console's files only: no inline script, no other origin
_CONSOLE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
}


class OpsViews:
    def __init__(self, backend: JournalBackend, retry_after_s: int, metrics: Metrics) -> None:
        self._backend = backend
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._openapi = orjson.dumps(openapi_document())  # static: rendered once
        self._console = {
            path.name: (path.read_bytes(), _CONSOLE_TYPES[path.suffix])
            for path in CONSOLE_DIR.iterdir()
            if path.suffix in _CONSOLE_TYPES
        }

    async def healthz(self, request: web.Request) -> web.Response:
        return json_response(Status(status="ok"))

    async def readyz(self, request: web.Request) -> web.Response:
        if not self._backend.ready():
            raise unavailable(
                ErrorCode.NOT_READY,
                "not ready to serve journals (starting)",
                self._retry_after_s,
            )
        refusal = self._backend.refusal()
        if refusal is not None:
            raise unavailable(ErrorCode.PARTITION_COUNT_CHANGED, str(refusal), self._retry_after_s)
        return json_response(Status(status="ready"))

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.render())
        # set as a header: Response(content_type=...) refuses parameters such as version
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    async def openapi(self, request: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")

    async def status(self, request: web.Request) -> web.Response:
        return json_response(worker_status(self._metrics, self._backend.workers()))

    async def quarantine(self, request: web.Request) -> web.Response:
        limit = parse_quarantine_limit(request.query)
        if not self._backend.ready():
            raise unavailable(
                ErrorCode.NOT_READY, "not ready (starting): no quarantine yet", self._retry_after_s
            )
        page = await self._backend.quarantined(limit)
        return json_response(
            QuarantineOut(records=[_quarantined_out(one) for one in page.records], total=page.total)
        )

    async def console(self, request: web.Request) -> web.Response:
        return self._console_file("index.html")

    async def console_file(self, request: web.Request) -> web.Response:
        return self._console_file(request.match_info["file"])

    def _console_file(self, name: str) -> web.Response:
        found = self._console.get(name)
        if found is None:
            raise web.HTTPNotFound()
        body, content_type = found
        return web.Response(
            body=body, content_type=content_type, charset="utf-8", headers=_CONSOLE_HEADERS
        )


def _quarantined_out(one: Quarantined) -> QuarantinedOut:
    partition, _, offset = (one.origin or ":").partition(":")
    return QuarantinedOut(
        partition=one.partition,
        offset=one.offset,
        originPartition=int(partition) if partition else None,
        originOffset=offset or None,
        reason=one.reason,
        timestamp=iso_timestamp(datetime.fromtimestamp(one.timestamp_ms / 1000, UTC)),
        key=None if one.key is None else one.key.decode("utf-8", "replace"),
        replayed=one.replayed,
    )
