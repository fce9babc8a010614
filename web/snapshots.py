"""The snapshot routes: `PUT /journals/{id}/snapshots/{seqNr}`, `GET .../snapshots/latest`,
`DELETE .../snapshots?to=n` (journal/client/snapshots.py says what they mean).

A PUT's body is JSON, as an append's: `{"payload" | "payloadText" | "payloadBinary"}`. Its
limit is the snapshot's, base64 included, not the API's general one: snapshots are far
larger than appends, and only this route needs that much.
"""

from __future__ import annotations

from aiohttp import web

from journal import Snapshot
from journal.metrics import METRICS, Metrics
from web import schema
from web.backend import JournalBackend
from web.body import read_body
from web.error_answers import ApiError, ErrorCode
from web.limits import Limits
from web.representation import iso_timestamp, json_response, payload_fields, position_out
from web.validation import (
    check_no_params,
    parse_delete_snapshots_query,
    parse_latest_snapshot_query,
    parse_snapshot,
    parse_snapshot_seq_nr,
)
from web.views import JournalViews

# room for the JSON around a payload, and for a JSON payload's escapes and spaces
_BODY_SLACK = 64 * 1024


def snapshot_body_limit(max_snapshot_bytes: int) -> int:
    """The largest PUT body a payload of `max_snapshot_bytes` may need: base64's 4/3."""
    return -(-max_snapshot_bytes // 3) * 4 + _BODY_SLACK


class SnapshotViews(JournalViews):
    """The three snapshot routes over one backend."""

    def __init__(
        self,
        backend: JournalBackend,
        limits: Limits,
        max_snapshot_bytes: int,
        metrics: Metrics = METRICS,
    ) -> None:
        super().__init__(backend, limits, metrics)
        self._max_body = max(limits.max_body_bytes, snapshot_body_limit(max_snapshot_bytes))

    async def put(self, request: web.Request) -> web.Response:
        """PUT /journals/{id}/snapshots/{seqNr} -> 200 {"seqNr", "timestamp"}."""
        _, journal = self._journal(request)
        seq_nr = parse_snapshot_seq_nr(request.match_info["seqNr"])
        check_no_params(request.query)
        payload = parse_snapshot(await read_body(request, self._max_body))
        stored = await journal.snapshots.put(seq_nr, payload)
        return json_response(
            schema.SnapshotStored(seqNr=stored.seq_nr, timestamp=iso_timestamp(stored.timestamp))
        )

    async def latest(self, request: web.Request) -> web.Response:
        """GET /journals/{id}/snapshots/latest?maxSeqNr=n -> 200 the snapshot, 404 if none."""
        _, journal = self._journal(request)
        max_seq_nr = parse_latest_snapshot_query(request.query)
        found = await journal.snapshots.latest(max_seq_nr)
        if found is None:
            raise ApiError(
                404,
                ErrorCode.SNAPSHOT_NOT_FOUND,
                f"the journal has no snapshot at or below seqNr {max_seq_nr}",
            )
        return json_response(snapshot_out(found))

    async def delete_snapshots(self, request: web.Request) -> web.Response:
        """DELETE /journals/{id}/snapshots?to=n -> 200 {"partition", "offset"} (the Mark)."""
        _, journal = self._journal(request)
        to = parse_delete_snapshots_query(request.query)
        return json_response(position_out(await journal.snapshots.delete(to)))


def snapshot_out(snapshot: Snapshot) -> schema.SnapshotOut:
    return schema.SnapshotOut(
        seqNr=snapshot.seq_nr,
        timestamp=iso_timestamp(snapshot.timestamp),
        **payload_fields(snapshot.payload),
    )
