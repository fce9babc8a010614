"""The OpenAPI 3.1 document of the HTTP API (served at /openapi.json).

The schemas of bodies, answers and query parameters are generated from the models of
`web.schema` (and `web.error_answers.Error`), the same that validate requests and write
answers. What is written here is what models cannot say: each operation's statuses and
descriptions. The paths are `web.routes.ROUTES`, each joined to its operation here by its
operationId.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from journal.client import MAX_IDEMPOTENCY_KEY
from journal.settings import DEFAULT_QUARANTINE_LIMIT, MAX_QUARANTINE_LIMIT
from web import schema
from web.error_answers import Error
from web.routes import ROUTES

JsonDoc = dict[str, Any]

_DESCRIPTION = """\
An event-sourcing journal on Kafka with Cassandra as the eventual store.

Every error is `{"error": {"code", "message"}}`; clients branch on `code`:
400 malformed input (never a 500), 404 unknown route, 405 wrong method, 413 body or append too
large, 410 `journal_truncated`, 409 `seq_nr_conflict` (a conditional append, `expectedSeqNr`,
found the journal elsewhere), 422 `idempotency_key_reused`, 503 + `Retry-After` while this
worker is not ready (starting), Kafka/Cassandra are unreachable, or the outcome
is unknown (`outcome_unknown`: the journal's owner died with the request, or a conditional
append could not learn its verdict), 500 only for bugs.

Conditional appends: on 409, read the journal and decide again (`error.seqNr` is its last
seqNr). On 503 `outcome_unknown` the append is wholly in the journal or wholly absent: retry
with the same `Idempotency-Key` (the first attempt's 200 if it took effect, else it is
attempted again) or read the journal. An append at the end (events without seqNrs) without an
`Idempotency-Key` is not safe to repeat: a repeat is numbered anew, so it is appended twice if
the first took effect (its `outcome_unknown` message says so); send a key with appends at the
end.

`journal_truncated` (410 Gone): events the request needs expired from Kafka before replication
stored them in Cassandra. That history is lost; retrying will not bring it back, so it is
neither a 503 (retry) nor a 500 (a bug); an operator must repair the journal.

`journal_erased` (410 Gone): the journal was erased (`DELETE /journals/{id}/payloads`,
docs/erasure.md): reads and appends of it answer this for good; a subscription passes its
events by as heartbeats at their positions.

Unknown query parameters and unknown body fields are refused (400), so typos do not pass
silently.

With security on (`KJ_SECURITY=on`), every route but `/healthz`, `/readyz` and this document
needs `Authorization: Bearer <JWT>` whose `scope` grants it: `journal:read` (GET a journal or
its events), `journal:write` (append), `journal:delete` (delete, purge), `journal:erase`
(erase), `journal:admin` (`/metrics`, `/status`, `/quarantine`), `journal:subscribe` (the
subscription groups: list, join a group's stream, acknowledge); the console's files (`/ui`) are
open, the API they call is not. A token limited to a journal id prefix lists ids (`/journals`)
and subscribes (`/events`) within it, and is refused by `/metrics`, `/status`, `/quarantine`
and the subscription groups. A token's group prefix claim limits it to the groups whose name
starts with it: `/subscriptions` lists only those. 401 `unauthorized` (with `WWW-Authenticate`)
without a valid token, 403 `forbidden` without the scope, for a journal id outside the token's
prefix claim or a group outside its group prefix claim."""

_SUBSCRIBE = """\
Every event the journals' logs accepted (never an Append the conflict rule rejected), one JSON
line each: the event as `GET /journals/{id}/events` writes it, plus its journal's `id` and a
`position`, which names the event. Pass the last `position` you processed as `after` to resume
after exactly that event (a position of an earlier version, inside an Append, repeats that
Append's events): delivery is at least once, in the log's order within
each Kafka partition, hence within each journal. **Partitions, and so journals in different
partitions, have no common order**: lines of different partitions interleave as they are read,
and a `tags` filter does not change that; the position covers every partition, so resuming is
exact anyway. Events older than Kafka's retention come from Cassandra, in the same order.
Events a Delete or Purge removed before the subscription reached them may be absent; events
it delivered stay delivered. `live=true` never ends and writes `{"heartbeat": true,
"position"}` after 5 s without events; `live=false` ends at the high watermarks as of its
start, with a last heartbeat line. `prefix` keeps the events of journals whose id starts with
it (heartbeats still carry the position past the others). With `Accept: text/event-stream` the
same items come as server-sent events: an event's line as `data:` with its position as `id:`,
a heartbeat as the comment `: hb` and an `id:` alone; an EventSource reconnects with
`Last-Event-ID`, which resumes as `after` does (and wins over it). Any worker serves it (no
forwarding). 503 while Cassandra
is down, unless Kafka still holds the partitions from offset 0; 410 when records expired from
Kafka before replication stored them."""

_GROUPS = """\
A subscription group shares the topic's partitions among its members, each partition read
from the group's checkpoint (a Kafka consumer group's committed offset). This stream is a
member for as long as it is open: Kafka assigns it some partitions (rebalancing as members come
and go) and it writes their accepted events as `GET /events` does, each `position` naming
that one event, and `{"heartbeat": true}` after 5 s without events. Acknowledge the events you
handled with `POST /subscriptions/{group}/ack`: a partition's checkpoint moves past the
events acknowledged up to its first unacknowledged one. When the stream closes the member
commits and leaves: its unacknowledged events go to the next member (at least once). With
`Accept: text/event-stream` the same events come as server-sent events: an event's line as
`data:` with its position as `id:` (what an ack names), a heartbeat as the comment `: hb`.
`Last-Event-ID` is ignored: a group resumes at its checkpoint, so an EventSource that
reconnects is the group's next member. A member
lives in the worker that serves its stream, so acks must reach that worker: send them on the
stream's worker (e.g. keep one connection to it); another worker answers 409 `no_member`,
nothing is forwarded. Bounds: a member holds at most `KJ_GROUP_MAX_UNACKED` (10,000 by
default) delivered records unacknowledged; at the cap the stream carries only heartbeats until
acks come. A worker serves at most `KJ_MAX_GROUP_STREAMS` (64) streams; the next is answered
503 `group_streams_full` with `Retry-After`. Needs the scope `journal:subscribe` and, with a
group prefix claim, a group name within it."""

_REF = "#/components/schemas/{model}"
_REQUESTS: tuple[type[BaseModel], ...] = (
    schema.AppendRequest,
    schema.SnapshotIn,
    schema.AckRequest,
)
_ANSWERS: tuple[type[BaseModel], ...] = (
    Error,
    schema.SnapshotOut,
    schema.SnapshotStored,
    schema.PositionOut,
    schema.ErasedOut,
    schema.AppendedOut,
    schema.EventOut,
    schema.JournalInfoOut,
    schema.DeletedOut,
    schema.JournalIdPageOut,
    schema.Status,
    schema.SubscribedEventOut,
    schema.HeartbeatOut,
    schema.WorkerStatusOut,
    schema.QuarantineOut,
    schema.GroupHeartbeatOut,
    schema.AckedOut,
    schema.GroupsOut,
)


def _schemas() -> JsonDoc:
    """The components' schemas: requests as they are validated, answers as they are written."""
    _, document = models_json_schema(
        [(model, "validation") for model in _REQUESTS]
        + [(model, "serialization") for model in _ANSWERS],
        ref_template=_REF,
    )
    schemas: JsonDoc = document["$defs"]
    for model in schemas.values():
        for field in model.get("properties", {}).values():
            _drop_null_default(field)
    schemas["JsonValue"] = schema.JSON_VALUE_SCHEMA
    return schemas


def _drop_null_default(field: JsonDoc) -> None:
    """An optional field's default null says nothing (absent is absent) and, where null is
    refused, would contradict the field's type."""
    if "default" in field and field["default"] is None:
        del field["default"]


def _parameters(query: type[BaseModel]) -> list[JsonDoc]:
    """A query model's fields as OpenAPI query parameters."""
    properties = query.model_json_schema(ref_template=_REF)["properties"]
    return [
        {
            "name": name,
            "in": "query",
            "required": field.is_required(),
            "description": field.description or "",
            "schema": {
                key: value
                for key, value in properties[name].items()
                if key not in ("title", "description") and not (key == "default" and value is None)
            },
        }
        for name, field in ((f.alias or n, f) for n, f in query.model_fields.items())
    ]


def _ref(kind: str, name: str) -> JsonDoc:
    return {"$ref": f"#/components/{kind}/{name}"}


def _json_content(schema: JsonDoc) -> JsonDoc:
    return {"application/json": {"schema": schema}}


def _ok(description: str, schema: JsonDoc) -> JsonDoc:
    return {"description": description, "content": _json_content(schema)}


def _errors(*statuses: str) -> JsonDoc:
    names = {
        "400": "BadRequest",
        "405": "MethodNotAllowed",
        "410": "JournalTruncated",
        "404": "SnapshotNotFound",
        "409": "SeqNrConflict",
        "413": "TooLarge",
        "422": "IdempotencyKeyReused",
        "500": "InternalError",
        "503": "Unavailable",
        "401": "Unauthorized",
        "403": "Forbidden",
    }
    always = ("401", "403", "405", "500")
    return {status: _ref("responses", names[status]) for status in (*statuses, *always)}


_JOURNAL_ERRORS = ("400", "503")
_READ_ERRORS = (*_JOURNAL_ERRORS, "410")


def _error_response(description: str, headers: JsonDoc | None = None) -> JsonDoc:
    response: JsonDoc = {
        "description": description,
        "content": _json_content(_ref("schemas", "Error")),
    }
    if headers:
        response["headers"] = headers
    return response


_RESPONSES: JsonDoc = {
    "BadRequest": _error_response("Malformed input: the message names the offending field."),
    "MethodNotAllowed": _error_response(
        "The route exists but not with this method.",
        {"Allow": {"schema": {"type": "string"}, "description": "the methods it has"}},
    ),
    "JournalTruncated": _error_response(
        "`journal_truncated`: events expired from Kafka before they were replicated; lost. "
        "`journal_erased`: the journal was erased (docs/erasure.md); gone for good."
    ),
    "TooLarge": _error_response(
        "`body_too_large` (over the configured body limit) or `append_too_large` (the encoded "
        "Kafka record would exceed the record limit) or `snapshot_too_large` (a snapshot's "
        "payload exceeds the snapshot limit)."
    ),
    "SnapshotNotFound": _error_response(
        "`snapshot_not_found`: no snapshot at or below `maxSeqNr` (and the journal's last seqNr)."
    ),
    "SnapshotBeyondJournal": _error_response(
        "`snapshot_beyond_journal`: the seqNr is beyond the journal's last one (`error.seqNr`); "
        "nothing was stored."
    ),
    "Unavailable": _error_response(
        "`not_ready` (this worker starting or stopping, or the journal's owner unreachable: "
        "nothing was applied), `partition_count_changed` (the topic's partition count is not "
        "the recorded one: refused until an operator acts; nothing was applied), `unavailable` "
        "(Kafka/Cassandra unreachable) or `outcome_unknown` (the owner died with the request: it "
        "may have been applied; repeat it, an append of the same seqNrs, one with an "
        "`Idempotency-Key` or a delete is safe; an append at the end without a key is not: "
        "appended twice if the first took effect, read the journal instead); for a group's "
        "stream, `group_streams_full` (this worker streams as many group members as it may, "
        "each a Kafka consumer: retry later or on another worker).",
        {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
    ),
    "SeqNrConflict": _error_response(
        "`seq_nr_conflict`: the journal's last seqNr (`error.seqNr`) is not the one the append "
        "needs (`expectedSeqNr`, or the seqNr before its first event); nothing of the append "
        "is or will be visible."
    ),
    "IdempotencyKeyReused": _error_response(
        "`idempotency_key_reused`: the `Idempotency-Key` took effect with another request; "
        "`idempotency_key_unresolved`: an append at the end whose earlier attempt could lie "
        "beyond the search's bounds (the journal's newest events, back to one older than the "
        "retry window or to its deleted events, 4096 at most); nothing was appended."
    ),
    "InternalError": _error_response("`internal_error`: a bug, logged with its traceback."),
    "Unauthorized": _error_response(
        "`unauthorized` (security on): no bearer token, or a bad, expired or foreign one.",
        {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "RFC 6750"}},
    ),
    "Forbidden": _error_response(
        "`forbidden` (security on): the token lacks the route's scope, the journal id is "
        "outside the token's prefix, or the group outside its group prefix."
    ),
    "NotFound": _error_response("`not_found`: no such route (any path not listed here)."),
    "NoMember": _error_response(
        "`no_member`: no member of the group streams from this worker; acks go to the worker "
        "that serves the group's stream (nothing is forwarded)."
    ),
}

_JOURNAL_ID: JsonDoc = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "The journal id (the Kafka record key), percent-encoded.",
    "schema": {"type": "string", "minLength": 1},
}


_SNAPSHOT_SEQ_NR: JsonDoc = {
    "name": "seqNr",
    "in": "path",
    "required": True,
    "description": "The last seqNr the snapshot covers: at most the journal's last seqNr.",
    "schema": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
}


_IDEMPOTENCY_KEY: JsonDoc = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Makes a retry safe (an append at the end needs one: without it, a retry "
    "after 503 `outcome_unknown` is numbered anew, appended twice if the first took effect): "
    "the same key with the same body, once the first "
    "attempt took effect, answers that attempt's 200 (its seqNrs) and adds nothing; with "
    "another body, 422. Remembered as long as the append's first event is (the key travels in "
    "its record); for events without seqNrs, found among the journal's newest events within a "
    "retry window (10 minutes by default) and above its deleted events (an attempt a Delete "
    "removed is forgotten), else 422 `idempotency_key_unresolved`.",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY},
}


_LAST_EVENT_ID: JsonDoc = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "A `position` (an SSE event's `id`): resume after it, as `after` does; "
    "an EventSource sends it when it reconnects. Wins over `after`.",
    "schema": {"type": "string", "minLength": 1},
}

_SUBSCRIBED_LINE: JsonDoc = {
    "oneOf": [_ref("schemas", "SubscribedEventOut"), _ref("schemas", "HeartbeatOut")]
}


def _ops(summary: str, response: JsonDoc, extra: JsonDoc | None = None) -> JsonDoc:
    return {"summary": summary, "responses": {"200": response, **(extra or {})}}


# Each route's operation, by the operationId `web.routes.ROUTES` gives it.
_OPERATIONS: dict[str, JsonDoc] = {
    "journalIds": {
        "summary": "A page of the ids of journals that exist, ascending.",
        "description": "Replicated journals and those Kafka holds only, as a read sees them: a "
        "journal whose last Purge left it empty, or whose Appends were all rejected, is not "
        "listed; one deleted up to its last seqNr is. Pages are not a snapshot: a journal "
        "created or purged meanwhile may or may not show. Follow `next` (as `after`) until it "
        "is null; a page may be short, even empty, before that. A token limited to a prefix "
        "lists the ids within it: `prefix` defaults to the token's and must start with it (403).",
        "parameters": _parameters(schema.IdsQuery),
        "responses": {
            "200": _ok("A page of ids.", _ref("schemas", "JournalIdPageOut")),
            **_errors(*_READ_ERRORS),
        },
    },
    "append": {
        "summary": "Append consecutive events atomically.",
        "description": "Events with seqNrs are appended as numbered; events without any are "
        "numbered by the worker that serialises the journal's appends, from the journal's last "
        "seqNr + 1, so concurrent writers do not conflict. By default (`ack=verified`) the "
        "answer is 200 only once the log accepted the append, 409 if it did not.",
        "parameters": [*_parameters(schema.AppendQuery), _IDEMPOTENCY_KEY],
        "requestBody": {
            "required": True,
            "content": _json_content(_ref("schemas", "AppendRequest")),
        },
        "responses": {
            "200": _ok(
                "Accepted by the log (ack=verified), or acknowledged by Kafka (ack=kafka): "
                "where the record landed and the seqNrs of its events.",
                _ref("schemas", "AppendedOut"),
            ),
            **_errors("400", "409", "410", "413", "422", "503"),
        },
    },
    "read": {
        "summary": "Stream events in seqNr order, one JSON object per line.",
        "description": "Events in [from, to], at most `limit`; `from` above `to` is an empty "
        "range, not an error.",
        "parameters": _parameters(schema.ReadQuery),
        "responses": {
            "200": {
                "description": "NDJSON, streamed; empty for an unknown journal. A failure after "
                "the first line drops the connection (the body ends without its chunked "
                "terminator).",
                "content": {"application/x-ndjson": {"schema": _ref("schemas", "EventOut")}},
            },
            **_errors(*_READ_ERRORS),
        },
    },
    "delete": {
        "summary": "Delete events up to min(to, last seqNr).",
        "parameters": _parameters(schema.DeleteQuery),
        "responses": {
            "200": _ok("deleteTo null: nothing to delete.", _ref("schemas", "DeletedOut")),
            **_errors(*_READ_ERRORS),
        },
    },
    "info": {
        "summary": "The last seqNr and deleteTo (null when none).",
        "responses": {
            "200": _ok("The journal's state.", _ref("schemas", "JournalInfoOut")),
            **_errors(*_READ_ERRORS),
        },
    },
    "purge": {
        "summary": "Remove the whole journal; seqNrs may restart at 1.",
        "responses": {
            "200": _ok("Where the Purge landed.", _ref("schemas", "PositionOut")),
            **_errors(*_JOURNAL_ERRORS),
        },
    },
    "erase": {
        "summary": "Erase the journal: its data key destroyed, its rows purged, for good.",
        "description": "Crypto-shredding (docs/erasure.md): needs a deployment with a "
        "key-encryption key (else 503 `erasure_unavailable`). From the first step on the "
        "journal answers 410 `journal_erased`; every copy of its payloads (Kafka, Cassandra, "
        "exports, backups) stays unreadable. Safe to repeat: after a failure, repeating "
        "finishes it.",
        "responses": {
            "200": _ok(
                "Where the Purge landed (none if erased before).", _ref("schemas", "ErasedOut")
            ),
            **_errors(*_JOURNAL_ERRORS),
        },
    },
    "subscribe": {
        "summary": "Stream every journal's accepted events, resumably.",
        "description": _SUBSCRIBE,
        "parameters": [*_parameters(schema.SubscribeQuery), _LAST_EVENT_ID],
        "responses": {
            "200": {
                "description": "NDJSON (or server-sent events), streamed: events and "
                "heartbeats. A failure after the first line drops the connection; resume after "
                "the last position received.",
                "content": {
                    "application/x-ndjson": {"schema": _SUBSCRIBED_LINE},
                    # OpenAPI 3.1 has no schema for an event stream's items: the lines
                    # are `data:` as described above
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            },
            **_errors(*_READ_ERRORS),
        },
    },
    "subscriptionGroups": {
        "summary": "The topic's subscription groups within the token's group prefix: state, "
        "and each partition's checkpoint, end offset, lag and member.",
        "responses": {
            "200": _ok("The groups, by name.", _ref("schemas", "GroupsOut")),
            **_errors(*_JOURNAL_ERRORS),
        },
    },
    "subscribeGroup": {
        "summary": "Stream a subscription group's events as one of its members.",
        "description": _GROUPS,
        "parameters": _parameters(schema.GroupEventsQuery),
        "responses": {
            "200": {
                "description": "NDJSON (or server-sent events), streamed: events (their "
                "`position` to acknowledge) and heartbeats. A failure after the first line "
                "drops the connection; the group resumes at its checkpoint.",
                "content": {
                    "application/x-ndjson": {
                        "schema": {
                            "oneOf": [
                                _ref("schemas", "SubscribedEventOut"),
                                _ref("schemas", "GroupHeartbeatOut"),
                            ]
                        }
                    },
                    # as for `GET /events`: the `data:` lines are described above
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            },
            **_errors(*_READ_ERRORS),
        },
    },
    "ackGroup": {
        "summary": "Acknowledge events a group's stream on this worker delivered.",
        "description": "Send it to the worker that serves the group's stream (e.g. on one "
        "connection kept to it): acks are not forwarded. Positions already acknowledged, or "
        "of partitions the member no longer has (delivered again elsewhere), are not counted.",
        "requestBody": {
            "required": True,
            "content": _json_content(_ref("schemas", "AckRequest")),
        },
        "responses": {
            "200": _ok("Acknowledged.", _ref("schemas", "AckedOut")),
            "409": _ref("responses", "NoMember"),
            **_errors("400", "413", "503"),
        },
    },
    "putSnapshot": {
        "summary": "Store a snapshot of the journal up to seqNr (replacing one there).",
        "description": "The body carries exactly one payload, as an event does; it may be as "
        "large as the snapshot limit (16 MiB by default, stored in Cassandra in chunks), and "
        "the body as large as that in base64. A Purge of the journal removes its snapshots: a "
        "snapshot taken before one never reappears.",
        "requestBody": {
            "required": True,
            "content": _json_content(_ref("schemas", "SnapshotIn")),
        },
        "responses": {
            "200": _ok("Stored.", _ref("schemas", "SnapshotStored")),
            "409": _ref("responses", "SnapshotBeyondJournal"),
            **_errors("400", "413", "503"),
        },
    },
    "latestSnapshot": {
        "summary": "The newest snapshot at or below maxSeqNr.",
        "parameters": _parameters(schema.LatestSnapshotQuery),
        "responses": {
            "200": _ok("The snapshot.", _ref("schemas", "SnapshotOut")),
            **_errors("400", "404", "410", "503"),
        },
    },
    "deleteSnapshots": {
        "summary": "Remove the snapshots at or below `to`.",
        "parameters": _parameters(schema.DeleteSnapshotsQuery),
        "responses": {
            "200": _ok(
                "Removed; where the Mark that orders the removal landed.",
                _ref("schemas", "PositionOut"),
            ),
            **_errors(*_JOURNAL_ERRORS),
        },
    },
    "healthz": _ops("The process is up.", _ok("up", _ref("schemas", "Status"))),
    "readyz": _ops(
        "Ready to serve journal requests (connected), also while the group rebalances; 503 "
        "`partition_count_changed` while the topic is refused (its partition count changed).",
        _ok("ready", _ref("schemas", "Status")),
        {"503": _ref("responses", "Unavailable")},
    ),
    "metrics": _ops(
        "Prometheus text exposition.",
        {"description": "metrics", "content": {"text/plain": {"schema": {"type": "string"}}}},
        {"401": _ref("responses", "Unauthorized"), "403": _ref("responses", "Forbidden")},
    ),
    "status": _ops(
        "This worker's partitions with their replication lag, quarantined records, requests; "
        "the group's workers with their partitions.",
        _ok(
            "From this worker's own metrics (counters since it started) and the group's last "
            "assignment as this worker knows it.",
            _ref("schemas", "WorkerStatusOut"),
        ),
        {"401": _ref("responses", "Unauthorized"), "403": _ref("responses", "Forbidden")},
    ),
    "quarantine": {
        "summary": "The records replication set aside (`<topic>.quarantine`), the newest first.",
        "description": "At most `limit` records (default "
        f"{DEFAULT_QUARANTINE_LIMIT}, at most {MAX_QUARANTINE_LIMIT}), the "
        "newest; `total` says how many the quarantine holds. `kafka-journal quarantine list` "
        "shows them all, `quarantine replay` replays those named that this version decodes.",
        "parameters": _parameters(schema.QuarantineQuery),
        "responses": {
            "200": _ok("The newest records.", _ref("schemas", "QuarantineOut")),
            **_errors("400", "503"),
        },
    },
    "console": _ops(
        "The operators' console: a page over this API (it asks for a token when security is on).",
        {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}},
    ),
    "consoleFile": {
        "summary": "A file of the console (its script and style sheet).",
        "responses": {
            "200": {
                "description": "the file",
                "content": {
                    "text/javascript": {"schema": {"type": "string"}},
                    "text/css": {"schema": {"type": "string"}},
                    "text/html": {"schema": {"type": "string"}},
                },
            },
            "404": _ref("responses", "NotFound"),
        },
    },
    "openapi": _ops(
        "This document.",
        {"description": "OpenAPI 3.1", "content": _json_content({"type": "object"})},
    ),
}

# The parameters of a path's {placeholders}, declared on the path (all its operations).
_PATH_PARAMETERS: dict[str, JsonDoc] = {
    "id": _ref("parameters", "JournalId"),
    "seqNr": _SNAPSHOT_SEQ_NR,
    "group": {
        "name": "group",
        "in": "path",
        "required": True,
        "description": "A subscription group's name: 1-200 of A-Za-z0-9._-.",
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,200}$"},
    },
    "file": {
        "name": "file",
        "in": "path",
        "required": True,
        "description": "A file of the console: index.html, app.js or style.css.",
        "schema": {"type": "string"},
    },
}


def _paths() -> JsonDoc:
    """Every route of `ROUTES` with its operation; KeyError for a route without one, and
    ValueError for an operation no route has."""
    paths: JsonDoc = {}
    for route in ROUTES:
        item = paths.setdefault(route.path, {})
        placeholders = re.findall(r"\{(\w+)\}", route.path)
        if placeholders and "parameters" not in item:
            item["parameters"] = [_PATH_PARAMETERS[name] for name in placeholders]
        operation = {"operationId": route.operation_id, **_OPERATIONS[route.operation_id]}
        item[route.method.lower()] = operation
    unrouted = set(_OPERATIONS) - {route.operation_id for route in ROUTES}
    if unrouted:
        raise ValueError(f"OpenAPI operations without a route: {sorted(unrouted)}")
    return paths


def openapi_document() -> JsonDoc:
    """The whole document (its parts are shared between calls: serialise it, do not mutate)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Kafka Journal", "version": "1", "description": _DESCRIPTION},
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "responses": _RESPONSES,
            "parameters": {"JournalId": _JOURNAL_ID},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
    }
