"""Any worker accepts any journal request and forwards it to the owner of the key's partition.

Why forward at all, when every worker reads correctly? The owner answers a read from its
tables once its agent reaches the read's fence (the high watermark by default, or the read's
Mark: journal/kafka/fence.py); any other worker must scan the partition in Kafka.

Faust's `table_route` is not used: it drops request bodies and buffers answers. This proxy
streams both ways (an append's body, a read's NDJSON) and marks what it forwarded, so a
request is forwarded at most once, with this worker's request id (`web.request_id`), so both
workers' log lines name it. When the owner is unknown (a rebalance), the request is served
here. Nothing logged here names a header: the Authorization header goes on, never into a log.

When the owner fails (killed, restarting), what the client gets depends on how far the
request went, never a 500:
- it never reached the owner (the connection could not be made: refused, timed out): nothing
  of it was written, so it can go elsewhere. A read is served here at once (any worker reads
  correctly); a change waits, bounded by `owner_wait_s`, for the owner to come back or for a
  new one (this worker included) and goes there; past the bound, 503 `not_ready`.
- it may have reached the owner (the connection broke after it was sent, before the whole
  answer came back): a read is served here; a change answers 503 `outcome_unknown`, since it
  may have been applied. The client repeats it: the same delete or purge, an append of the
  same seqNrs (an Append that does not continue the journal is ignored by every fold) and an
  append with an `Idempotency-Key` are safe to repeat; an append at the end (events without
  seqNrs) without a key is not: a repeat is numbered anew, appended twice if the first took
  effect. An append without a key hears so (this proxy does not parse the body to tell).
- a read's stream breaks after its first bytes went to the client: the client's connection is
  dropped (`StreamInterrupted`), never ended as if the journal ended there.

An owner that answers 503 `not_ready` (starting, or stopping: web/draining.py) did nothing of
the request: as if it never reached it. So a worker that is stopping hands its requests over: a
read is served here, a change waits for the new owner as above. The change's body, read from
the client as it went to the refusing owner, is kept (`_Body`) and sent again; if the change is
then this worker's to serve, it comes back to this worker as a forwarded request, with it.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import StreamReader, web
from multidict import CIMultiDict, CIMultiDictProxy
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_before_delay,
    wait_random_exponential,
)
from yarl import URL

from journal.kafka import partition_of
from journal.metrics import METRICS
from tables.partitions import OwnedPartitions
from web.error_answers import ApiError, ErrorCode, StreamInterrupted
from web.failures import UNKEYED_AT_END, unavailable
from web.limits import DEFAULT_RETRY_AFTER_S
from web.request_id import REQUEST_ID_HEADER, current_request_id
from web.validation import IDEMPOTENCY_KEY
from web.views import journal_id_of

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Journal-Forwarded"
# Authorization is end to end, so it goes on: the owner checks the caller's token again (the
# forwarded marker proves nothing, anyone can send it).
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailers",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
    )
)

# How long a change that never reached a failed owner waits for it to come back or for a new
# owner: a restarted worker (static membership) listens again within seconds; a reassignment
# after a worker vanished waits for its group session to expire, far longer than a client should
# wait for one answer, so that ends in a 503 the client retries.
OWNER_WAIT_S = 5.0
# Workers are on one network: a connection that takes longer is to a host that is gone.
OWNER_CONNECT_TIMEOUT_S = 2.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class OwnerLookup(Protocol):
    def owner_of(self, journal_id: str) -> URL | None:
        """The owner's base URL, or None when it is this worker or not known."""


class Owners:
    """Which worker owns which partition, from the Faust assignor's table metadata."""

    def __init__(
        self, app: Any, owned: OwnedPartitions, table: str, partitions: int, own_url: str
    ) -> None:
        self._app = app
        self._owned = owned
        self._table = table
        self._partitions = partitions
        self._own = URL(own_url)

    def owner_of(self, journal_id: str) -> URL | None:
        """The owner's base URL, or None when it is this worker or not known."""
        partition = partition_of(journal_id, self._partitions)
        if self._owned.owns(partition):
            return None
        try:
            hosts = self._app.router.table_metadata(self._table)
        except KeyError:
            return None
        for url, topics in hosts.items():
            if any(partition in partitions for partitions in topics.values()):
                owner = URL(url)
                return None if _same(owner, self._own) else owner
        return None

    def workers(self) -> dict[str, tuple[int, ...]]:
        """Each worker's base URL and the partitions it owns, as the assignor last told this
        worker (what `owner_of` asks); empty before the first assignment."""
        try:
            hosts = self._app.router.table_metadata(self._table)
        except KeyError:
            return {}
        return {
            url: tuple(sorted({p for partitions in topics.values() for p in partitions}))
            for url, topics in sorted(hosts.items())
        }


def _same(a: URL, b: URL) -> bool:
    return (a.host, a.port) == (b.host, b.port)


class _OwnerFailed(Exception):
    kind = ""  # the label of kafka_journal_forward_failures_total

    def __init__(self, owner: URL, detail: str) -> None:
        super().__init__(f"{owner}: {detail}")
        self.owner = owner


class _NeverReached(_OwnerFailed):
    """Nothing of the request was sent, or the owner refused it (503 `not_ready`): it can go to
    another owner, or be served here."""

    kind = "never_reached"


class _OutcomeUnknown(_OwnerFailed):
    """The request was (perhaps partly) sent and no complete answer came back."""

    kind = "outcome_unknown"


class _Sending:
    """Whether any of a forwarded request was handed to a connection yet.

    Set by aiohttp's trace signal just before the request's head is written (so an error
    after it may, or may not, have reached the owner), and never reset: aiohttp resends a
    GET or DELETE once on a new connection when the first one broke, and if that second
    connection is refused, the first attempt may still have been applied.
    """

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False


async def _on_headers_sent(
    session: aiohttp.ClientSession,
    context: SimpleNamespace,
    params: aiohttp.TraceRequestHeadersSentParams,
) -> None:
    context.trace_request_ctx.started = True


def _failed(kind: type[_OwnerFailed], owner: URL, error: aiohttp.ClientError | str) -> _OwnerFailed:
    METRICS.counter("kafka_journal_forward_failures_total", kind=kind.kind).inc()
    if isinstance(error, aiohttp.ClientError):
        error = f"{type(error).__name__}: {error or 'no detail'}"
    return kind(owner, error)


def _not_ready(status: int, content: bytes) -> bool:
    """Whether an owner's answer is 503 `not_ready`: it is starting or stopping."""
    if status != 503:
        return False
    try:
        code = orjson.loads(content)["error"]["code"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return False
    return bool(code == ErrorCode.NOT_READY)


class Forwarder:
    """The middleware that sends journal requests to their partition's owner."""

    def __init__(
        self,
        owners: OwnerLookup,
        *,
        owner_wait_s: float = OWNER_WAIT_S,
        retry_after_s: int = DEFAULT_RETRY_AFTER_S,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._owners = owners
        self._tls = tls  # verifies an https owner (None: the system's CAs)
        self._owner_wait_s = owner_wait_s
        self._retry_after_s = retry_after_s
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if "id" not in request.match_info or FORWARDED_HEADER in request.headers:
            return await handler(request)
        try:
            journal_id = journal_id_of(request)
        except ApiError:
            return await handler(request)  # it answers the 400
        if request.method == "GET":
            return await self._read(request, handler, journal_id)
        return await self._change(request, handler, journal_id)

    async def _read(
        self, request: web.Request, handler: Handler, journal_id: str
    ) -> web.StreamResponse:
        """A read is correct on any worker: if the owner fails before answering, serve it here."""
        owner = self._owners.owner_of(journal_id)
        if owner is not None:
            try:
                return await self._forward(request, owner, _Body(request))
            except _OwnerFailed as failure:
                log.warning("owner failed (%s): serving %s here", failure, request.path)
        return await handler(request)

    async def _change(
        self, request: web.Request, handler: Handler, journal_id: str
    ) -> web.StreamResponse:
        """An append, delete or purge goes to the owner, once: see the module's doc."""
        owner = self._owners.owner_of(journal_id)
        if owner is None:
            # served here (the common case of a worker that owns the partition): no retry
            # machinery is built, which cost ~10% of the worker's CPU per append
            return await handler(request)
        body = _Body(request)
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_NeverReached),
            stop=stop_before_delay(self._owner_wait_s),
            wait=wait_random_exponential(multiplier=0.05, max=0.5),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        # asked again: the partition may have moved, here included
                        owner = self._owners.owner_of(journal_id)
                    if owner is None and body.taken:
                        # served here, but its body is no longer in this request: sent again
                        owner = _listening(request)
                    if owner is not None:
                        return await self._forward(request, owner, body)
        except _NeverReached as failure:
            raise unavailable(
                ErrorCode.NOT_READY,
                f"the owner of this journal's partition cannot be reached or is not ready "
                f"({failure}) and no other owner took over within {self._owner_wait_s:g} s; "
                "nothing of it was applied",
                self._retry_after_s,
            ) from failure
        except _OutcomeUnknown as failure:
            unkeyed = request.method == "POST" and IDEMPOTENCY_KEY not in request.headers
            raise unavailable(
                ErrorCode.OUTCOME_UNKNOWN,
                f"the owner of this journal's partition failed after the request was sent "
                f"({failure}): it may or may not have been applied; repeat the same request"
                + (f", but {UNKEYED_AT_END}" if unkeyed else ""),
                self._retry_after_s,
            ) from failure
        return await handler(request)  # this worker owns the partition, or nobody is known to

    async def _forward(self, request: web.Request, owner: URL, body: _Body) -> web.StreamResponse:
        """The owner's answer; `_NeverReached` or `_OutcomeUnknown` when it failed.

        An answer with a length (every JSON answer: small) is read whole before anything is
        answered, so its loss can still be reported; a streamed one (a read's NDJSON) is relayed
        as it comes.
        """
        if self._session is None:
            tracing = aiohttp.TraceConfig()
            tracing.on_request_headers_sent.append(_on_headers_sent)
            self._session = aiohttp.ClientSession(
                auto_decompress=False,
                # total=None: a read's stream lasts as long as its journal
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=OWNER_CONNECT_TIMEOUT_S),
                trace_configs=[tracing],
                connector=aiohttp.TCPConnector(ssl=self._tls if self._tls is not None else True),
            )
        headers = _end_to_end(request.headers)
        headers[FORWARDED_HEADER] = "1"
        request_id = current_request_id.get()
        if request_id is not None:  # the owner's log lines name the same request
            headers[REQUEST_ID_HEADER] = request_id
        target = owner.with_path(request.raw_path.split("?")[0], encoded=True).with_query(
            request.query_string
        )
        METRICS.counter("kafka_journal_forwarded_requests_total").inc()
        sending = _Sending()
        try:
            answer = await self._session.request(
                request.method,
                target,
                headers=headers,
                data=body.data(),
                allow_redirects=False,
                trace_request_ctx=sending,
            )
        except aiohttp.ClientError as error:
            kind = _OutcomeUnknown if sending.started else _NeverReached
            raise _failed(kind, owner, error) from error
        async with answer:
            if answer.content_length is None:
                return await _relay(request, answer, owner)
            try:
                content = await answer.read()
            except aiohttp.ClientError as error:
                raise _failed(_OutcomeUnknown, owner, error) from error
            if _not_ready(answer.status, content):
                raise _failed(_NeverReached, owner, "answered 503 not_ready")
            return web.Response(
                status=answer.status,
                reason=answer.reason,
                body=content,
                headers=_end_to_end(answer.headers),
            )


class _Body:
    """A forwarded request's body, kept as it is read from the client, so that the request can
    be sent again after an owner refused it unapplied: what was kept, then the rest."""

    def __init__(self, request: web.Request) -> None:
        self._content = request.content if request.can_read_body else None
        self._kept: list[bytes] = []

    @property
    def taken(self) -> bool:
        """Whether any of it was read from the client: the request no longer holds it whole."""
        return bool(self._kept)

    def data(self) -> AsyncIterator[bytes] | None:
        return None if self._content is None else self._chunks(self._content)

    async def _chunks(self, content: StreamReader) -> AsyncIterator[bytes]:
        for chunk in list(self._kept):
            yield chunk
        async for chunk in content.iter_any():
            self._kept.append(chunk)
            yield chunk


def _listening(request: web.Request) -> URL:
    """This worker, at the address `request` reached it on."""
    sockname = request.get_extra_info("sockname")
    if sockname is None:
        raise ConnectionResetError("the client left")  # 503 unavailable, to nobody
    host, port = sockname[:2]
    return URL.build(scheme="http", host=host, port=port)


async def _relay(
    request: web.Request, answer: aiohttp.ClientResponse, owner: URL
) -> web.StreamResponse:
    response = web.StreamResponse(
        status=answer.status, reason=answer.reason, headers=_end_to_end(answer.headers)
    )
    await response.prepare(request)
    try:
        async for chunk in _chunks(answer, owner):
            await response.write(chunk)
    except ConnectionError:
        return response  # our client left; aiohttp closes the connection quietly
    await response.write_eof()
    return response


async def _chunks(answer: aiohttp.ClientResponse, owner: URL) -> AsyncIterator[bytes]:
    try:
        async for chunk in answer.content.iter_any():
            yield chunk
    except aiohttp.ClientError as error:
        METRICS.counter("kafka_journal_forward_failures_total", kind="stream_broken").inc()
        log.warning("the owner %s broke a streamed answer: %r", owner, error)
        raise StreamInterrupted(f"the owner {owner} broke its answer: {error!r}") from error


def _end_to_end(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _HOP_BY_HOP)
