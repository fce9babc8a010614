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
import os
import re
import time
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
    return sent if sent is not None and _ACCEPTED.fullmatch(sent) else _fresh_id()


# fresh ids, made _FRESH_IDS at a time: uuid4's os.urandom call per request was most of what
# the middlewares cost an append
_FRESH_IDS = 256
_fresh: list[str] = []
os.register_at_fork(after_in_child=_fresh.clear)  # a forked child must not repeat its parent's


def _fresh_id() -> str:
    """`uuid.uuid4().hex`: 16 random bytes with the version (4) and variant bits set."""
    try:
        return _fresh.pop()
    except IndexError:
        random = os.urandom(16 * _FRESH_IDS)
        for start in range(0, len(random), 16):
            raw = bytearray(random[start : start + 16])
            raw[6] = raw[6] & 0x0F | 0x40
            raw[8] = raw[8] & 0x3F | 0x80
            _fresh.append(raw.hex())
        return _fresh.pop()


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
