"""The API's one error shape and the codes it uses.

Every error answer, whatever produced it, is `{"error": {"code": <snake_case>, "message": ...}}`
with the status the code implies. Handlers raise `ApiError`; the error middleware renders it
(and translates aiohttp's own HTTP exceptions and the core's failures into one, see
`web.failures`). Codes are part of the API contract: clients branch on them, so they are listed
here once and the OpenAPI document enumerates this list.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field


class ErrorCode(StrEnum):
    """Every `error.code` the API answers with, and the status that goes with it."""

    MALFORMED_JSON = "malformed_json"  # 400: the body is not JSON (or not UTF-8)
    INVALID_BODY = "invalid_body"  # 400: JSON of the wrong shape or types
    INVALID_SEQ_NR = "invalid_seq_nr"  # 400: seqNr missing, out of range or not consecutive
    INVALID_PAYLOAD = "invalid_payload"  # 400: two payloads, bad base64, unencodable value
    INVALID_EXPIRE_AFTER = "invalid_expire_after"  # 400: not a positive ISO 8601 duration
    INVALID_HEADERS = "invalid_headers"  # 400: not string to string, or a reserved name
    INVALID_QUERY = "invalid_query"  # 400: a bad, repeated, missing or unknown query parameter
    # (or a bad Last-Event-ID: the position `after` gives, as an SSE client resends it)
    INVALID_JOURNAL_ID = "invalid_journal_id"  # 400: an id Kafka/Cassandra cannot key on
    INVALID_GROUP = "invalid_group"  # 400: not a subscription group name
    INCOMPLETE_BODY = "incomplete_body"  # 400: the client stopped sending mid-body
    UNAUTHORIZED = "unauthorized"  # 401: no bearer token, or a bad or expired one
    FORBIDDEN = "forbidden"  # 403: the token lacks the route's scope, the id's or group's prefix
    NOT_FOUND = "not_found"  # 404: no such route
    METHOD_NOT_ALLOWED = "method_not_allowed"  # 405: the route exists, not with this method
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"  # 400: empty, too long, not ASCII
    SEQ_NR_CONFLICT = "seq_nr_conflict"  # 409: the journal is not at the expectedSeqNr
    # 409: an ack for a group with no member streaming on this worker
    NO_MEMBER = "no_member"
    JOURNAL_TRUNCATED = "journal_truncated"  # 410: events expired from Kafka unreplicated
    JOURNAL_ERASED = "journal_erased"  # 410: the journal was erased (docs/erasure.md)
    # 503: erasure needs the deployment's key-encryption key, which this worker is not given
    ERASURE_UNAVAILABLE = "erasure_unavailable"
    BODY_TOO_LARGE = "body_too_large"  # 413: the request body exceeds the configured limit
    APPEND_TOO_LARGE = "append_too_large"  # 413: the encoded record exceeds Kafka's limit
    SNAPSHOT_TOO_LARGE = "snapshot_too_large"  # 413: a snapshot's payload exceeds the limit
    SNAPSHOT_BEYOND_JOURNAL = "snapshot_beyond_journal"  # 409: its seqNr is past the journal's
    SNAPSHOT_NOT_FOUND = "snapshot_not_found"  # 404: no snapshot at or below maxSeqNr
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"  # 422: the key took another request
    # 422: a keyed append at the end whose earlier attempt could be beyond the search's bounds
    IDEMPOTENCY_KEY_UNRESOLVED = "idempotency_key_unresolved"
    NOT_READY = "not_ready"  # 503: this worker, or the owner of the journal, is (re)starting
    UNAVAILABLE = "unavailable"  # 503: Kafka or Cassandra cannot be reached in time
    # 503: the topic's partition count is not the recorded one (journal/kafka/guard.py): this
    # worker refuses the topic until an operator acts (docs/operations.md)
    PARTITION_COUNT_CHANGED = "partition_count_changed"
    UNDECODABLE_RECORDS = "undecodable_records"  # 503: the head spans a batch not decodable here
    # 503: this worker streams as many group members as it may (each is a Kafka consumer)
    GROUP_STREAMS_FULL = "group_streams_full"
    # 503: it may or may not have taken effect (the owner died with it, or a conditional
    # append could not learn its verdict): repeat it
    OUTCOME_UNKNOWN = "outcome_unknown"
    INTERNAL_ERROR = "internal_error"  # 500: a bug; logged with its traceback
    HTTP_ERROR = "http_error"  # any other status aiohttp itself raises (e.g. 400 on bad HTTP)


class ApiError(Exception):
    """An error answer: raised anywhere below a view, rendered by the error middleware."""

    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        headers: Mapping[str, str] | None = None,
        seq_nr: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.seq_nr = seq_nr  # the journal's last seqNr, where a code says so

    def response(self) -> web.Response:
        return error_response(self.status, self.code, self.message, self.headers, self.seq_nr)


def bad_request(code: ErrorCode, message: str) -> ApiError:
    return ApiError(400, code, message)


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: ErrorCode
    message: str = Field(description="what went wrong and why")
    seqNr: int = Field(
        default=0,
        ge=0,
        description="`seq_nr_conflict` and `snapshot_beyond_journal` only: the journal's last "
        "seqNr (0 for none) when the append or snapshot was refused",
    )


class Error(BaseModel):
    """Every error answer: clients branch on `error.code`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error: ErrorDetail


def error_body(code: ErrorCode, message: str, seq_nr: int | None = None) -> bytes:
    detail = (
        ErrorDetail(code=code, message=message)
        if seq_nr is None
        else ErrorDetail(code=code, message=message, seqNr=seq_nr)
    )
    answer = Error(error=detail)
    return answer.__pydantic_serializer__.to_json(answer, exclude_unset=True)


def error_response(
    status: int,
    code: ErrorCode,
    message: str,
    headers: Mapping[str, str] | None = None,
    seq_nr: int | None = None,
) -> web.Response:
    # no-store: an error (a 410 especially) describes this moment, no cache should keep it
    all_headers = {"Cache-Control": "no-store", **(headers or {})}
    return web.Response(
        status=status,
        body=error_body(code, message, seq_nr),
        content_type="application/json",
        headers=all_headers,
    )


class StreamInterrupted(Exception):
    """A streamed answer failed after its status and first bytes were sent.

    No status can be given any more, so the error middleware lets this pass and aiohttp drops
    the connection without the chunked terminator: the client sees a broken body, never a
    clean end it could mistake for the end of the journal.
    """
