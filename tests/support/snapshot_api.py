"""A journal's snapshots as the snapshot suite sees them: the direct client or HTTP.

Both raise the core's errors for refusals (HTTP's 413 `snapshot_too_large` and 409
`snapshot_beyond_journal` become `SnapshotTooLarge` and `SnapshotBeyondJournal`), so the suite
states each refusal once.
"""

from __future__ import annotations

import base64
from typing import Protocol

import orjson

from journal.core.model import BinaryPayload, JsonPayload, Payload, TextPayload
from journal.errors import SnapshotBeyondJournal, SnapshotTooLarge
from tests.support.http_api import HttpError, HttpJournals, journal_path
from tests.support.journal_api import JournalApi
from web.representation import payload_fields


class SnapshotApi(JournalApi, Protocol):
    max_snapshot_bytes: int

    async def put_snapshot(self, journal_id: str, seq_nr: int, payload: Payload) -> None: ...

    async def latest_snapshot(
        self, journal_id: str, max_seq_nr: int | None = None
    ) -> tuple[int, Payload] | None:
        """(seqNr, payload) of the newest snapshot at or below `max_seq_nr`; None if none."""
        ...

    async def delete_snapshots(self, journal_id: str, to: int) -> None: ...


def payload_of(answer: dict[str, object]) -> Payload:
    if "payloadText" in answer:
        return TextPayload(str(answer["payloadText"]))
    if "payloadBinary" in answer:
        return BinaryPayload(base64.b64decode(str(answer["payloadBinary"])))
    return JsonPayload.of(answer["payload"])  # type: ignore[arg-type]


class HttpSnapshots(HttpJournals):
    """`HttpJournals` with the snapshot routes."""

    max_snapshot_bytes = 16 * 2**20  # the worker's default

    async def put_snapshot(self, journal_id: str, seq_nr: int, payload: Payload) -> None:
        url = self.at(journal_path(journal_id, f"/snapshots/{seq_nr}"))
        body = orjson.dumps(payload_fields(payload))
        headers = {"Content-Type": "application/json"}
        async with self.session.put(url, data=body, headers=headers) as response:
            answer = orjson.loads(await response.read())
            if response.status == 413 and answer["error"]["code"] == "snapshot_too_large":
                raise SnapshotTooLarge(answer["error"]["message"])
            if response.status == 409 and answer["error"]["code"] == "snapshot_beyond_journal":
                raise SnapshotBeyondJournal(seq_nr, answer["error"]["seqNr"])
            if response.status != 200:
                raise HttpError(f"PUT {url}: {response.status} {answer!r}")
            assert answer["seqNr"] == seq_nr and set(answer) == {"seqNr", "timestamp"}

    async def latest_snapshot(
        self, journal_id: str, max_seq_nr: int | None = None
    ) -> tuple[int, Payload] | None:
        query = "" if max_seq_nr is None else f"?maxSeqNr={max_seq_nr}"
        url = self.at(journal_path(journal_id, f"/snapshots/latest{query}"))
        async with self.session.get(url) as response:
            answer = orjson.loads(await response.read())
            if response.status == 404 and answer["error"]["code"] == "snapshot_not_found":
                return None
            if response.status != 200:
                raise HttpError(f"GET {url}: {response.status} {answer!r}")
            return answer["seqNr"], payload_of(answer)

    async def delete_snapshots(self, journal_id: str, to: int) -> None:
        path = journal_path(journal_id, f"/snapshots?to={to}")
        answer = await self.request_json("DELETE", path)
        assert set(answer) == {"partition", "offset"}
