"""Middlewares: every error becomes the API's JSON error; every request is counted.

`error_middleware` renders `ApiError`s, turns aiohttp's HTTP exceptions (unknown route 404,
wrong method 405, ...) into the same JSON shape, maps known failures of the core and its
drivers (see `web.failures`) and answers anything else with a logged 500. `metrics_middleware`
counts requests by method, route template (never the raw path: ids would explode the label
space) and status, and observes their latency per method and route in a histogram; a
long-lived route's requests (subscriptions) are observed in a histogram of their own, by
status, and counted while open: a day-long subscription is no request latency.
"""

from __future__ import annotations

import logging
import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from journal.metrics import NAMESPACE, CountingChild, Metrics, ObservingChild
from web.error_answers import ErrorCode, StreamInterrupted, error_response
from web.failures import api_error_of

log = logging.getLogger(__name__)

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_CODE_OF_STATUS = {
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.BODY_TOO_LARGE,  # aiohttp's own client_max_size, if the host app set one
}


def error_middleware(retry_after_s: int) -> Middleware:
    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except StreamInterrupted:
            raise
        except web.HTTPException as e:
            if e.status < 400:  # redirects and the like are answers, not errors
                raise
            return _http_exception_response(request, e)
        except Exception as e:
            api_error = api_error_of(e, retry_after_s)
            if api_error is not None:
                if api_error.status >= 500 or api_error.status == 410:
                    log.warning("%s %s: %s", request.method, request.path, api_error.message)
                return api_error.response()
            log.exception("unexpected error serving %s %s", request.method, request.path)
            return error_response(
                500,
                ErrorCode.INTERNAL_ERROR,
                f"unexpected {type(e).__name__} while serving the request; it has been logged",
            )

    return errors


def _http_exception_response(request: web.Request, e: web.HTTPException) -> web.Response:
    code = _CODE_OF_STATUS.get(e.status, ErrorCode.HTTP_ERROR)
    headers: dict[str, str] = {}
    if isinstance(e, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(e.allowed_methods))
        headers["Allow"] = allowed
        message = f"{request.method} is not allowed on {request.path}; allowed: {allowed}"
    elif e.status == 404:
        message = f"no route for {request.method} {request.path}; the API is in /openapi.json"
    else:
        message = e.text if e.text and e.text != f"{e.status}: {e.reason}" else e.reason
    return error_response(e.status, code, message, headers)


_REQUESTS = NAMESPACE + "_http_requests_total"
_REQUEST_DURATION = NAMESPACE + "_http_request_duration_seconds"
_SUBSCRIPTION_DURATION = NAMESPACE + "_http_subscription_duration_seconds"
_SUBSCRIPTIONS_OPEN = NAMESPACE + "_http_subscriptions_open"


def metrics_middleware(metrics: Metrics, long_lived: frozenset[str] = frozenset()) -> Middleware:
    """`long_lived`: the route templates measured as subscriptions."""
    # each request's two children, by (method, route, status): one dict lookup per request
    children: dict[tuple[str, str, str], tuple[CountingChild, ObservingChild]] = {}
    subscriptions_open = metrics.gauge(_SUBSCRIPTIONS_OPEN)

    @web.middleware
    async def measured(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        route = _route_label(request)
        method = request.method if request.method in _METHODS else "other"
        subscription = route in long_lived
        if subscription:
            subscriptions_open.inc()
        status = "aborted"  # the handler raised past every error handler, or the client left
        try:
            response = await handler(request)
            status = str(response.status)
            return response
        except web.HTTPException as e:  # only when error_middleware is not installed
            status = str(e.status)
            raise
        finally:
            # a streamed read is timed to its end: the histogram shows what clients wait
            elapsed = time.perf_counter() - started
            key = (method, route, status)
            pair = children.get(key)
            if pair is None:
                pair = children[key] = (
                    metrics.counter(_REQUESTS, method=method, route=route, status=status),
                    metrics.histogram(_SUBSCRIPTION_DURATION, status=status)
                    if subscription
                    else metrics.histogram(_REQUEST_DURATION, method=method, route=route),
                )
            pair[0].inc()
            pair[1].observe(elapsed)
            if subscription:
                subscriptions_open.dec()

    return measured


def _route_label(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return "unmatched" if resource is None else resource.canonical
