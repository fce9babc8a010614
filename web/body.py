"""Reading a request body without ever holding more than the configured limit.

The limit is enforced here rather than through aiohttp's `client_max_size` because these routes
may be mounted on an application someone else configured (the Faust worker's). A declared
`Content-Length` above the limit is refused before a byte is read; a body without one (chunked,
or compressed: aiohttp inflates `Content-Encoding` as it reads) is counted as it arrives and
refused as soon as it passes the limit.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from web.error_answers import ApiError, ErrorCode


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        ErrorCode.BODY_TOO_LARGE,
        f"the request body is larger than {limit} bytes: split the events into smaller appends",
    )


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The whole body, at most `limit` bytes; ApiError 413 beyond, 400 if it breaks off."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except (HttpProcessingError, ConnectionError) as e:
        # the body is cut short or mis-framed: the client's side, not ours
        raise ApiError(
            400, ErrorCode.INCOMPLETE_BODY, f"the request body could not be read: {e}"
        ) from None
    return b"".join(chunks)
