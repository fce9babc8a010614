"""The journal routes: parse the request, call the backend's journal, render the answer.

Each view checks readiness first (503 `not_ready` + Retry-After while the backend cannot serve:
no point reading a body that cannot be served), then parses everything it needs before any
I/O, so a bad request costs no Kafka round trip. Errors are raised as exceptions and rendered
by `web.middleware.error_middleware`.

A read streams NDJSON: the first event (or the end) is awaited *before* the response is
prepared, because the reading flow does all of its checking (its fence: the partition's high
watermark, or a Mark it produces with `read_fence=mark`; the pointer, head, truncation) before
yielding anything; so every failure of the flow still gets a proper status. After that,
events are written a batch at a time as the journal yields them (a page of the store, the
head's events), a write each; a failure mid-stream breaks
the connection (see `StreamInterrupted`) rather than ending the body as if the journal ended.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TypeVar

from aiohttp import web

from journal import EventRecord, Heartbeat
from journal.client import append_events
from journal.errors import InvalidValue, JournalError, SetupMissing
from journal.metrics import METRICS, Metrics
from journal.subscriptions import EventPosition, GroupEvent, SubscriptionItem
from web.backend import GroupMemberHandle, JournalBackend, JournalHandle
from web.body import read_body
from web.error_answers import ApiError, ErrorCode, StreamInterrupted, bad_request
from web.failures import unavailable
from web.grant import listing_prefix, may_see_group
from web.limits import Limits
from web.representation import (
    EVENT_STREAM,
    NDJSON,
    EventLines,
    SubscriptionEvents,
    SubscriptionFrames,
    SubscriptionLines,
    appended_response,
    deleted_out,
    group_event_stream,
    group_lines,
    groups_out,
    ids_out,
    info_out,
    json_response,
    position_out,
)
from web.schema import AckedOut, ErasedOut
from web.validation import (
    check_no_params,
    parse_ack,
    parse_append,
    parse_append_query,
    parse_delete_query,
    parse_group_events_query,
    parse_group_name,
    parse_idempotency_key,
    parse_ids_query,
    parse_journal_id,
    parse_read_query,
    parse_subscribe_query,
)

log = logging.getLogger(__name__)

_Item = TypeVar("_Item")


class OpenMembers:
    """The group members this process streams to clients now, by group: where an ack goes.
    A worker's acks reach only its own members (a member's checkpoints are its own)."""

    def __init__(self) -> None:
        self._by_group: dict[str, list[GroupMemberHandle]] = {}

    @contextmanager
    def serving(self, name: str, member: GroupMemberHandle) -> Iterator[None]:
        members = self._by_group.setdefault(name, [])
        members.append(member)
        try:
            yield
        finally:
            members.remove(member)
            if not members:
                del self._by_group[name]

    def ack(self, name: str, positions: Sequence[EventPosition]) -> int | None:
        """How many of `positions` the group's open members here had out; None without any
        (the members of a group own distinct partitions: no event is counted twice)."""
        members = self._by_group.get(name)
        if not members:
            return None
        return sum(member.ack(*positions) for member in members)


class JournalViews:
    """The journal routes over one backend."""

    def __init__(self, backend: JournalBackend, limits: Limits, metrics: Metrics = METRICS) -> None:
        self._backend = backend
        self._limits = limits
        self._metrics = metrics
        # looked up once: a child's lookup by name costs more than its increment
        self._appended = metrics.counter("kafka_journal_http_appended_events_total")
        self._read_latency = metrics.histogram("kafka_journal_read_duration_seconds")
        self._streamed = metrics.counter("kafka_journal_http_streamed_events_total")
        self._interrupted = metrics.counter("kafka_journal_http_streams_interrupted_total")
        self._subscription_lines = metrics.counter("kafka_journal_http_subscription_lines_total")
        self._members = OpenMembers()
        self._group_streams = 0  # open now, or starting

    def _check_ready(self) -> None:
        if not self._backend.ready():
            raise unavailable(
                ErrorCode.NOT_READY,
                "this worker is not ready to serve journals (starting)",
                self._limits.retry_after_s,
            )

    def _journal(self, request: web.Request) -> tuple[str, JournalHandle]:
        self._check_ready()
        journal_id = parse_journal_id(_raw_id(request))
        return journal_id, self._backend.journal(journal_id)

    async def ids(self, request: web.Request) -> web.Response:
        """GET /journals?prefix&after&limit -> 200 {"journals": [...], "next": id | null}."""
        self._check_ready()
        query = parse_ids_query(request.query)
        prefix = listing_prefix(request, query.prefix)  # within the caller's token's
        page = await self._backend.journal_ids(prefix, query.after, query.limit)
        return json_response(ids_out(page))

    async def append(self, request: web.Request) -> web.Response:
        """POST /journals/{id}/events?ack -> 200 {"partition", "offset", "seqNr": {"from",
        "to"}} once the log accepted it (409 if it rejected it); with ack=kafka and seqNrs,
        once Kafka acknowledged it. Events without seqNrs are appended at the journal's end."""
        _, journal = self._journal(request)
        ack = parse_append_query(request.query)
        idempotency_key = parse_idempotency_key(request.headers)
        append = parse_append(await read_body(request, self._limits.max_body_bytes))
        try:
            appended = await append_events(
                journal,
                append.events,
                metadata=append.metadata,
                headers=append.headers,
                expected_seq_nr=append.expected_seq_nr,
                idempotency_key=idempotency_key,
                ack=ack,
            )
        except InvalidValue as e:
            # the parse checked all of the body but the succession of its seqNrs, which the
            # core checks once, at the append (`check_consecutive`), and what `ack` allows
            raise bad_request(ErrorCode.INVALID_SEQ_NR, f"the body's events: {e}") from None
        self._appended.inc(len(append.events))
        return appended_response(appended)

    async def read(self, request: web.Request) -> web.StreamResponse:
        """GET /journals/{id}/events?from&to&limit -> 200 NDJSON, streamed; empty if unknown."""
        _, journal = self._journal(request)
        query = parse_read_query(request.query)
        batches = journal.read_batches(query.from_, query.to, query.limit)
        async with _closing(batches):
            # before prepare(): the reading flow's failures can still become a status. The
            # flow does all of its work (fence, pointer, head) before the first event, so the
            # time to it is the core's read latency; the rest is streaming at the client's pace.
            started = time.perf_counter()
            try:
                first = await anext(batches, None)
            finally:
                self._read_latency.observe(time.perf_counter() - started)
            response = await _ndjson_response(request)
            if first is not None and not await self._stream(request, response, first, batches):
                return response  # the client left; aiohttp closes the connection quietly
            await response.write_eof()
        return response

    async def subscribe(self, request: web.Request) -> web.StreamResponse:
        """GET /events?after(|=end)&tags&live&prefix -> 200 NDJSON, or server-sent events for
        `Accept: text/event-stream`, streamed: accepted events of every journal (or of those
        whose id starts with `prefix`), each with its id and position, and heartbeats. A
        `Last-Event-ID` header (an SSE client's reconnection) resumes after that position,
        before `after`. As a read, the first line is awaited before the response starts, so a
        failure to start is a status."""
        if not self._backend.ready():
            raise unavailable(
                ErrorCode.NOT_READY,
                "this worker is not ready to serve subscriptions (starting)",
                self._limits.retry_after_s,
            )
        query = parse_subscribe_query(request.query, request.headers.get("Last-Event-ID"))
        prefix = listing_prefix(request, query.prefix)  # within the caller's token's
        frames: SubscriptionFrames = (
            SubscriptionEvents() if _wants_event_stream(request) else SubscriptionLines()
        )
        after = await self._backend.end_position() if query.from_end else query.after
        items = self._backend.subscribe(after, query.tags, query.live)
        if prefix:
            items = _within_prefix(items, prefix)
        async with _closing(items):
            first = await anext(items, None)
            response = await _streaming_response(request, frames.content_type)
            if first is not None and not await self._stream_items(
                response, _framed(frames), first, items
            ):
                return response
            await response.write_eof()
        return response

    async def _stream(
        self,
        request: web.Request,
        response: web.StreamResponse,
        first: list[EventRecord],
        rest: AsyncIterator[list[EventRecord]],
    ) -> bool:
        """Write `first` and then `rest`, a write per list of events (a write per line would
        cost more than making it); False if the client went away meanwhile."""
        sent = 0
        lines = EventLines()
        try:
            await response.write(lines.lines(first))
            sent = len(first)
            async for batch in rest:
                await response.write(lines.lines(batch))
                sent += len(batch)
        except Exception as e:
            # a failed write: the client went away; the core's Unavailable is a ConnectionError
            if isinstance(e, ConnectionError) and not isinstance(e, JournalError):
                return False
            self._interrupted.inc()
            log.warning(
                "read of %s broke after %d events, connection dropped: %s: %s",
                request.path,
                sent,
                type(e).__name__,
                e,
            )
            raise StreamInterrupted(str(e)) from e
        finally:
            self._streamed.inc(sent)
        return True

    async def _stream_items(
        self,
        response: web.StreamResponse,
        encode: Callable[[Sequence[_Item]], bytes],
        first: Sequence[_Item],
        rest: AsyncIterator[Sequence[_Item]],
    ) -> bool:
        """`_stream` for a subscription or a group member: a write per list of items
        (`encode`d); False if the client went away. A failure drops the connection: the client
        resumes after the last position it got (a member: from the group's checkpoint)."""
        sent = 0
        try:
            await response.write(encode(first))
            sent = len(first)
            async for batch in rest:
                await response.write(encode(batch))
                sent += len(batch)
        except ConnectionError as e:
            if not isinstance(e, JournalError):  # the client left (Unavailable is one too)
                return False
            self._interrupted.inc()
            log.warning("subscription broke after %d lines: %s: %s", sent, type(e).__name__, e)
            raise StreamInterrupted(str(e)) from e
        except Exception as e:
            self._interrupted.inc()
            log.warning("subscription broke after %d lines: %s: %s", sent, type(e).__name__, e)
            raise StreamInterrupted(str(e)) from e
        finally:
            self._subscription_lines.inc(sent)
        return True

    def _check_ready_for_groups(self) -> None:
        if not self._backend.ready():
            raise unavailable(
                ErrorCode.NOT_READY,
                "this worker is not ready to serve subscription groups (starting)",
                self._limits.retry_after_s,
            )

    async def groups(self, request: web.Request) -> web.Response:
        """GET /subscriptions -> 200 {"groups": [{"name", "state", "partitions": [{"partition",
        "checkpoint", "end", "lag", "member"}]}]}: the groups within the token's group prefix."""
        self._check_ready_for_groups()
        check_no_params(request.query)
        visible = may_see_group(request)  # a token sees only the groups it may join
        statuses = [s for s in await self._backend.group_statuses() if visible(s.name)]
        return json_response(groups_out(statuses))

    async def group_events(self, request: web.Request) -> web.StreamResponse:
        """GET /subscriptions/{group}/events?tags -> 200 NDJSON, or server-sent events for
        `Accept: text/event-stream`, streamed: the events of a member of the group that lives
        as long as the request, each with its event position (what an ack names; an SSE
        event's `id:`), and heartbeats while idle. When the client leaves, the member commits
        what was acknowledged and leaves the group: the rest is delivered again to the next
        member."""
        self._check_ready_for_groups()
        name = parse_group_name(request.match_info["group"])
        tags = parse_group_events_query(request.query)
        # A `Last-Event-ID` is ignored: a group resumes at its checkpoint, not at a client's
        # position; an EventSource sends it on every reconnection, and a 400 would end that
        # EventSource for good instead of making it the group's next member.
        encode, content_type = (
            (group_event_stream, EVENT_STREAM)
            if _wants_event_stream(request)
            else (group_lines, NDJSON)
        )
        with self._group_stream_slot():
            return await self._serve_member(request, name, tags, encode, content_type)

    @contextmanager
    def _group_stream_slot(self) -> Iterator[None]:
        """One of this worker's group streams, taken before its member starts (so concurrent
        requests cannot pass the limit), or 503 `group_streams_full`: the limit guards this
        worker (a Kafka consumer per stream), not a client's quota, and another worker or a
        later try may have room: a 503 with Retry-After says that; a 429 would blame the client."""
        limit = self._limits.max_group_streams
        if self._group_streams >= limit:
            raise unavailable(
                ErrorCode.GROUP_STREAMS_FULL,
                f"this worker streams {limit} group members, its limit: retry later or on "
                "another worker",
                self._limits.retry_after_s,
            )
        self._group_streams += 1
        try:
            yield
        finally:
            self._group_streams -= 1

    async def _serve_member(
        self,
        request: web.Request,
        name: str,
        tags: frozenset[str],
        encode: Callable[[Sequence[GroupEvent]], bytes],
        content_type: str,
    ) -> web.StreamResponse:
        member = self._backend.subscribe_group(name, tags)
        await member.start()
        try:
            with self._members.serving(name, member):
                batches = member.batches()
                async with _closing(batches):
                    first = await anext(batches, None)
                    response = await _streaming_response(request, content_type)
                    if first is not None and not await self._stream_items(
                        response, encode, first, batches
                    ):
                        return response
                    await response.write_eof()
        finally:
            await member.stop()
        return response

    async def group_ack(self, request: web.Request) -> web.Response:
        """POST /subscriptions/{group}/ack {"positions": [...]} -> 200 {"acknowledged": n}, the
        events the group's members streaming from this worker had out; 409 `no_member` if
        none streams from here."""
        self._check_ready_for_groups()
        name = parse_group_name(request.match_info["group"])
        check_no_params(request.query)
        positions = parse_ack(await read_body(request, self._limits.max_body_bytes))
        acknowledged = self._members.ack(name, positions)
        if acknowledged is None:
            raise ApiError(
                409,
                ErrorCode.NO_MEMBER,
                f"no member of group {name} streams from this worker: acknowledge on the "
                "worker that serves the group's stream",
            )
        return json_response(AckedOut(acknowledged=acknowledged))

    async def info(self, request: web.Request) -> web.Response:
        """GET /journals/{id} -> 200 {"id", "seqNr", "deleteTo"} (nulls for an unknown one)."""
        journal_id, journal = self._journal(request)
        check_no_params(request.query)
        return json_response(info_out(journal_id, await journal.info()))

    async def delete(self, request: web.Request) -> web.Response:
        """DELETE /journals/{id}/events?to=N -> 200 {"deleteTo", "partition"?, "offset"?}."""
        _, journal = self._journal(request)
        to = parse_delete_query(request.query)
        return json_response(deleted_out(await journal.delete(to)))

    async def purge(self, request: web.Request) -> web.Response:
        """DELETE /journals/{id} -> 200 {"partition", "offset"}."""
        _, journal = self._journal(request)
        check_no_params(request.query)
        return json_response(position_out(await journal.purge()))

    async def erase(self, request: web.Request) -> web.Response:
        """DELETE /journals/{id}/payloads -> 200 {"already", "partition"?, "offset"?}: the
        journal erased (docs/erasure.md); safe to repeat, and repeated after a failure it
        finishes the erasure."""
        _, journal = self._journal(request)
        check_no_params(request.query)
        try:
            erasure = await journal.erase()
        except SetupMissing as error:
            raise unavailable(
                ErrorCode.ERASURE_UNAVAILABLE, str(error), self._limits.retry_after_s
            ) from error
        position = erasure.position
        if position is None:
            return json_response(ErasedOut(already=erasure.already))
        out = ErasedOut(
            already=erasure.already, partition=position.partition, offset=position.offset
        )
        return json_response(out)


def journal_id_of(request: web.Request) -> str:
    """The journal id a journal route was called with; ApiError (400) if it is not valid."""
    return parse_journal_id(_raw_id(request))


def _raw_id(request: web.Request) -> str:
    """The id's segment as sent, still percent-encoded (see `parse_journal_id` for why).

    Counted from the end, as far from it as `{id}` is in the route (.../journals/{id},
    .../journals/{id}/events, .../journals/{id}/snapshots/{seqNr}): a host application may
    mount the routes under a prefix.
    """
    resource = request.match_info.route.resource
    after = 0 if resource is None else _segments_after_id(resource.canonical)
    return request.rel_url.raw_parts[-1 - after]


@functools.cache
def _segments_after_id(canonical: str) -> int:
    """How many path segments follow `{id}` in a route template (a handful of templates)."""
    parts = canonical.split("/")
    return len(parts) - 1 - parts.index("{id}") if "{id}" in parts else 0


@asynccontextmanager
async def _closing(records: AsyncIterator[_Item]) -> AsyncIterator[AsyncIterator[_Item]]:
    """Close an async generator when the view is done with it, early or not, releasing its
    consumer and store paging at once instead of whenever the garbage collector gets to it."""
    try:
        yield records
    finally:
        await _aclose(records)


async def _aclose(records: AsyncIterator[_Item]) -> None:
    aclose = getattr(records, "aclose", None)
    if aclose is not None:
        await aclose()


async def _ndjson_response(request: web.Request) -> web.StreamResponse:
    """A read's response, started: NDJSON, never cached."""
    return await _streaming_response(request, NDJSON)


async def _streaming_response(request: web.Request, content_type: str) -> web.StreamResponse:
    """A read's or a subscription's response, started, never cached."""
    response = web.StreamResponse(headers={"Cache-Control": "no-store"})
    response.content_type = content_type
    await response.prepare(request)
    return response


def _wants_event_stream(request: web.Request) -> bool:
    """Whether the client asked for server-sent events (an EventSource sends just that)."""
    accepted = request.headers.get("Accept", "")
    return any(part.split(";")[0].strip() == EVENT_STREAM for part in accepted.split(","))


def _framed(frames: SubscriptionFrames) -> Callable[[Sequence[SubscriptionItem]], bytes]:
    def encode(items: Sequence[SubscriptionItem]) -> bytes:
        return b"".join([frames.line(item) for item in items])

    return encode


async def _within_prefix(
    batches: AsyncIterator[Sequence[SubscriptionItem]], prefix: str
) -> AsyncIterator[Sequence[SubscriptionItem]]:
    """The items of journals whose id starts with `prefix`, and every heartbeat; a batch
    left empty becomes a heartbeat at its last position, so the client's position moves past
    the events left out (and a stream of others' events still starts the response)."""
    try:
        async for batch in batches:
            kept = [
                item
                for item in batch
                if isinstance(item, Heartbeat) or item.key.id.startswith(prefix)
            ]
            yield kept or [Heartbeat(batch[-1].position)]
    finally:
        await _aclose(batches)
