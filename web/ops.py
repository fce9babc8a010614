"""Operational routes: liveness, readiness, metrics, the API's own description.

`/healthz` answers 200 while the process can answer at all, and does nothing else. `/readyz`
asks the backend whether this process can serve journal requests (a Faust worker: once its
core is connected, also while its group rebalances, as it serves or forwards requests then):
200 or 503 + Retry-After, so load balancers stop sending requests it would refuse anyway.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from journal.metrics import CONTENT_TYPE, Metrics
from web.backend import JournalBackend
from web.error_answers import ErrorCode
from web.failures import unavailable
from web.openapi import openapi_document
from web.representation import json_response
from web.schema import Status


class OpsViews:
    def __init__(self, backend: JournalBackend, retry_after_s: int, metrics: Metrics) -> None:
        self._backend = backend
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._openapi = orjson.dumps(openapi_document())  # static: rendered once

    async def healthz(self, request: web.Request) -> web.Response:
        return json_response(Status(status="ok"))

    async def readyz(self, request: web.Request) -> web.Response:
        if not self._backend.ready():
            raise unavailable(
                ErrorCode.NOT_READY,
                "not ready to serve journals (starting)",
                self._retry_after_s,
            )
        return json_response(Status(status="ready"))

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.render())
        # set as a header: Response(content_type=...) refuses parameters such as version
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    async def openapi(self, request: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")
