"""Request ids: each request gets one, which its log lines carry and forwarding passes on.

A client's own `X-Request-Id` is kept when it is a plain token (letters, digits, `-_.:`, at
most 128), so a client can find its request in the logs and a forwarded request keeps the id
the first worker gave it; anything else is replaced by a fresh one, since it would be written
into log lines as it is. The id is echoed in the answer's `X-Request-Id`.

While the request is handled the id is `current_request_id`'s value (a log formatter reads
it there). Each request also gets a DEBUG line on the `web.access` logger when it ends.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextvars import ContextVar

from aiohttp import web
from aiohttp.typedefs import Handler

REQUEST_ID_HEADER = "X-Request-Id"
current_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)

_REQUEST_ID_KEY = web.RequestKey("request_id", str)
_ACCEPTED = re.compile(r"[A-Za-z0-9._:-]{1,128}")

access_log = logging.getLogger("web.access")


def request_id_of(request: web.Request) -> str:
    """The client's id if acceptable, else a new one."""
    sent = request.headers.get(REQUEST_ID_HEADER)
    return sent if sent is not None and _ACCEPTED.fullmatch(sent) else uuid.uuid4().hex


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request[_REQUEST_ID_KEY] = request_id_of(request)
    token = current_request_id.set(request_id)
    started = time.perf_counter()
    status = "aborted"
    try:
        response = await handler(request)
        status = str(response.status)
        return response
    except web.HTTPException as e:  # only when the error middleware is not installed
        status = str(e.status)
        raise
    finally:
        if access_log.isEnabledFor(logging.DEBUG):
            access_log.debug(
                "%s %s %s %.1f ms",
                request.method,
                request.path,
                status,
                (time.perf_counter() - started) * 1000,
            )
        current_request_id.reset(token)


async def echo_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """An `on_response_prepare` signal: the answer names its request's id."""
    request_id = request.get(_REQUEST_ID_KEY)
    if request_id is not None:
        response.headers[REQUEST_ID_HEADER] = request_id
