"""The OpenAPI 3.1 document of the HTTP API (served at /openapi.json).

Written out rather than generated from the routes, so it is a second statement of the contract
that the tests hold against the router (every route must be described here). Error codes are
taken from `ErrorCode`, the one list the code uses.
"""

from __future__ import annotations

from typing import Any

from journal.model import SEQ_NR_MAX
from web.errors import ErrorCode

JsonDoc = dict[str, Any]

_DESCRIPTION = """\
An event-sourcing journal on Kafka with Cassandra as the eventual store.

Every error is `{"error": {"code", "message"}}`; clients branch on `code`:
400 malformed input (never a 500), 404 unknown route, 405 wrong method, 413 body or append too
large, 410 `journal_truncated`, 503 + `Retry-After` while this worker is not ready (starting,
rebalancing) or Kafka/Cassandra are unreachable, or `outcome_unknown` when the worker owning
the journal died with the request (repeat it), 500 only for bugs.

`journal_truncated` (410 Gone): events the request needs expired from Kafka before replication
stored them in Cassandra. That history is lost; retrying will not bring it back, so it is
neither a 503 (retry) nor a 500 (a bug); an operator must repair the journal.

Unknown query parameters and unknown body fields are refused (400), so typos do not pass
silently."""

_SEQ_NR: JsonDoc = {"type": "integer", "minimum": 1, "maximum": SEQ_NR_MAX}
_JSON_ANY: JsonDoc = {"description": "any JSON value"}


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
        "413": "TooLarge",
        "500": "InternalError",
        "503": "Unavailable",
    }
    return {status: _ref("responses", names[status]) for status in (*statuses, "405", "500")}


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


def _query(name: str, description: str, schema: JsonDoc, required: bool = False) -> JsonDoc:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema,
    }


_SCHEMAS: JsonDoc = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "enum": [code.value for code in ErrorCode]},
                    "message": {"type": "string", "description": "what went wrong and why"},
                },
            }
        },
    },
    "SeqNr": _SEQ_NR,
    "EventIn": {
        "type": "object",
        "required": ["seqNr"],
        "additionalProperties": False,
        "description": "An event to append: at most one of payload, payloadText, payloadBinary.",
        "properties": {
            "seqNr": _ref("schemas", "SeqNr"),
            "payload": _JSON_ANY,
            "payloadText": {"type": "string"},
            "payloadBinary": {"type": "string", "contentEncoding": "base64"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
        },
        "not": {
            "anyOf": [
                {"required": ["payload", "payloadText"]},
                {"required": ["payload", "payloadBinary"]},
                {"required": ["payloadText", "payloadBinary"]},
            ]
        },
    },
    "AppendRequest": {
        "type": "object",
        "required": ["events"],
        "additionalProperties": False,
        "properties": {
            "events": {
                "type": "array",
                "minItems": 1,
                "items": _ref("schemas", "EventIn"),
                "description": "Consecutive seqNrs, written atomically as one Kafka record.",
            },
            "metadata": {**_JSON_ANY, "description": "stored with the events (any JSON)"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Kafka record headers; `journal.action` is reserved.",
            },
            "expireAfter": {
                "type": "string",
                "format": "duration",
                "description": "ISO 8601, positive, no years or months: P1D, PT1H, PT0.5S.",
                "examples": ["P1D"],
            },
        },
    },
    "Position": {
        "type": "object",
        "required": ["partition", "offset"],
        "properties": {
            "partition": {"type": "integer", "minimum": 0},
            "offset": {"type": "integer", "minimum": 0},
        },
    },
    "EventOut": {
        "type": "object",
        "required": ["seqNr", "tags", "timestamp", "partition", "offset"],
        "description": "One line of a read; at most one of the payload fields is present.",
        "properties": {
            "seqNr": _ref("schemas", "SeqNr"),
            "payload": _JSON_ANY,
            "payloadText": {"type": "string"},
            "payloadBinary": {"type": "string", "contentEncoding": "base64"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "timestamp": {"type": "string", "format": "date-time"},
            "partition": {"type": "integer", "minimum": 0},
            "offset": {"type": "integer", "minimum": 0},
            "metadata": _JSON_ANY,
            "expireAfter": {"type": "string", "format": "duration"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "JournalInfo": {
        "type": "object",
        "required": ["id", "seqNr", "deleteTo"],
        "properties": {
            "id": {"type": "string"},
            "seqNr": {"oneOf": [_ref("schemas", "SeqNr"), {"type": "null"}]},
            "deleteTo": {"oneOf": [_ref("schemas", "SeqNr"), {"type": "null"}]},
        },
    },
    "Deleted": {
        "type": "object",
        "required": ["deleteTo"],
        "description": "partition/offset are present when a Delete was written.",
        "properties": {
            "deleteTo": {"oneOf": [_ref("schemas", "SeqNr"), {"type": "null"}]},
            "partition": {"type": "integer", "minimum": 0},
            "offset": {"type": "integer", "minimum": 0},
        },
    },
    "Status": {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string"}},
    },
}

_RESPONSES: JsonDoc = {
    "BadRequest": _error_response("Malformed input: the message names the offending field."),
    "MethodNotAllowed": _error_response(
        "The route exists but not with this method.",
        {"Allow": {"schema": {"type": "string"}, "description": "the methods it has"}},
    ),
    "JournalTruncated": _error_response(
        "`journal_truncated`: events expired from Kafka before they were replicated; lost."
    ),
    "TooLarge": _error_response(
        "`body_too_large` (over the configured body limit) or `append_too_large` (the encoded "
        "Kafka record would exceed the record limit)."
    ),
    "Unavailable": _error_response(
        "`not_ready` (this worker or the journal's owner starting, rebalancing), `unavailable` "
        "(Kafka/Cassandra unreachable) or `outcome_unknown` (the owner died with the request: it "
        "may have been applied; repeat it, an append of the same seqNrs or a delete is safe).",
        {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
    ),
    "InternalError": _error_response("`internal_error`: a bug, logged with its traceback."),
    "NotFound": _error_response("`not_found`: no such route (any path not listed here)."),
}

_JOURNAL_ID: JsonDoc = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "The journal id (the Kafka record key), percent-encoded.",
    "schema": {"type": "string", "minLength": 1},
}


def _ops_get(summary: str, response: JsonDoc, extra: JsonDoc | None = None) -> JsonDoc:
    return {"get": {"summary": summary, "responses": {"200": response, **(extra or {})}}}


def openapi_document() -> JsonDoc:
    """The whole document (its parts are shared between calls: serialise it, do not mutate)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Kafka Journal", "version": "1", "description": _DESCRIPTION},
        "paths": {
            "/journals/{id}/events": {
                "parameters": [_ref("parameters", "JournalId")],
                "post": {
                    "operationId": "append",
                    "summary": "Append consecutive events atomically.",
                    "requestBody": {
                        "required": True,
                        "content": _json_content(_ref("schemas", "AppendRequest")),
                    },
                    "responses": {
                        "200": _ok("Kafka acknowledged (acks=all).", _ref("schemas", "Position")),
                        **_errors("400", "413", "503"),
                    },
                },
                "get": {
                    "operationId": "read",
                    "summary": "Stream events in seqNr order, one JSON object per line.",
                    "description": "Events in [from, to], at most `limit`; `from` above `to` "
                    "is an empty range, not an error.",
                    "parameters": [
                        _query("from", "first seqNr", {**_SEQ_NR, "default": 1}),
                        _query("to", "last seqNr", {**_SEQ_NR, "default": SEQ_NR_MAX}),
                        _query(
                            "limit", "at most this many events", {"type": "integer", "minimum": 0}
                        ),
                    ],
                    "responses": {
                        "200": {
                            "description": "NDJSON, streamed; empty for an unknown journal. A "
                            "failure after the first line drops the connection (the body "
                            "ends without its chunked terminator).",
                            "content": {
                                "application/x-ndjson": {"schema": _ref("schemas", "EventOut")}
                            },
                        },
                        **_errors(*_READ_ERRORS),
                    },
                },
                "delete": {
                    "operationId": "delete",
                    "summary": "Delete events up to min(to, last seqNr).",
                    "parameters": [_query("to", "delete up to this seqNr", _SEQ_NR, True)],
                    "responses": {
                        "200": _ok("deleteTo null: nothing to delete.", _ref("schemas", "Deleted")),
                        **_errors(*_READ_ERRORS),
                    },
                },
            },
            "/journals/{id}": {
                "parameters": [_ref("parameters", "JournalId")],
                "get": {
                    "operationId": "info",
                    "summary": "The last seqNr and deleteTo (null when none).",
                    "responses": {
                        "200": _ok("The journal's state.", _ref("schemas", "JournalInfo")),
                        **_errors(*_READ_ERRORS),
                    },
                },
                "delete": {
                    "operationId": "purge",
                    "summary": "Remove the whole journal; seqNrs may restart at 1.",
                    "responses": {
                        "200": _ok("Where the Purge landed.", _ref("schemas", "Position")),
                        **_errors(*_JOURNAL_ERRORS),
                    },
                },
            },
            "/healthz": _ops_get("The process is up.", _ok("up", _ref("schemas", "Status"))),
            "/readyz": _ops_get(
                "Ready to serve journals (assigned and recovered).",
                _ok("ready", _ref("schemas", "Status")),
                {"503": _ref("responses", "Unavailable")},
            ),
            "/metrics": _ops_get(
                "Prometheus text exposition.",
                {
                    "description": "metrics",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
            ),
            "/openapi.json": _ops_get(
                "This document.",
                {"description": "OpenAPI 3.1", "content": _json_content({"type": "object"})},
            ),
        },
        "components": {
            "schemas": _SCHEMAS,
            "responses": _RESPONSES,
            "parameters": {"JournalId": _JOURNAL_ID},
        },
    }
