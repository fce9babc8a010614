"""The semantic suite's JournalApi over HTTP, against one server or several (round robin)."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import quote

import aiohttp
import orjson
from yarl import URL

from app.http_tokens import client_headers
from journal.core.model import BinaryPayload, Event, JsonPayload, Payload, TextPayload
from journal.settings import Settings
from web.representation import payload_fields


def client_session(settings: Settings, **options: object) -> aiohttp.ClientSession:
    """A session that sends the token `settings` give (KJ_TOKEN, or minted when security is
    on), so HTTP tests run as they are under KJ_SECURITY=on."""
    return aiohttp.ClientSession(headers=client_headers(settings), **options)  # type: ignore[arg-type]


class HttpError(AssertionError):
    """A non-200 answer where the suite expected success."""


def journal_path(journal_id: str, suffix: str = "") -> str:
    """The percent-encoded path of a journal (ids may contain '/', spaces, anything)."""
    return f"/journals/{quote(journal_id, safe='')}{suffix}"


_JSON = {"Content-Type": "application/json"}


def event_json(event: Event) -> dict[str, object]:
    """An event as a client sends it (the same payload fields the API answers with)."""
    return {"seqNr": event.seq_nr, "tags": sorted(event.tags), **payload_fields(event.payload)}


def event_of(line: dict[str, object]) -> Event:
    tags, seq_nr = line["tags"], line["seqNr"]
    assert isinstance(tags, list) and isinstance(seq_nr, int)
    payload: Payload | None = None
    if "payload" in line:
        payload = JsonPayload.of(line["payload"])  # type: ignore[arg-type]
    elif "payloadText" in line:
        payload = TextPayload(str(line["payloadText"]))
    elif "payloadBinary" in line:
        payload = BinaryPayload(base64.b64decode(str(line["payloadBinary"])))
    return Event(seq_nr, frozenset(tags), payload)


async def nothing() -> None:
    return None


class HttpJournals:
    """Journals through the HTTP API; each request goes to the next of `urls`."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        urls: Sequence[URL],
        settle: Callable[[], Awaitable[None]] = nothing,
    ) -> None:
        self.session = session
        self._urls = itertools.cycle(urls)
        self._settle = settle

    def at(self, path_and_query: str) -> URL:
        """The URL of an already percent-encoded path, with an optional `?query`."""
        path, _, query = path_and_query.partition("?")
        url = next(self._urls).with_path(path, encoded=True)
        return url.with_query(query) if query else url

    async def request_json(self, method: str, path: str, **kwargs: object) -> dict[str, object]:
        url = self.at(path)
        async with self.session.request(method, url, **kwargs) as response:  # type: ignore[arg-type]
            body = await response.read()
            if response.status != 200:
                raise HttpError(f"{method} {url}: {response.status} {body!r}")
            parsed = orjson.loads(body)
            assert isinstance(parsed, dict)
            return parsed

    async def append(self, journal_id: str, batch: Sequence[Event]) -> None:
        # compact, as `JsonPayload.of` writes a payload: the API keeps a payload's text as sent,
        # so the events read back (by any path) are these events, byte for byte
        body = orjson.dumps({"events": [event_json(e) for e in batch]})
        answer = await self.request_json(
            "POST", journal_path(journal_id, "/events?ack=kafka"), data=body, headers=_JSON
        )
        assert set(answer) == {"partition", "offset", "seqNr"}

    async def read(
        self, journal_id: str, from_: int = 1, to: int | None = None, limit: int | None = None
    ) -> list[Event]:
        params = {"from": str(from_)}
        if to is not None:
            params["to"] = str(to)
        if limit is not None:
            params["limit"] = str(limit)
        url = self.at(journal_path(journal_id, "/events")).with_query(params)
        async with self.session.get(url) as response:
            if response.status != 200:
                raise HttpError(f"GET {url}: {response.status} {await response.read()!r}")
            assert response.headers["Content-Type"] == "application/x-ndjson"
            return [event_of(orjson.loads(line)) async for line in response.content]

    async def info(self, journal_id: str) -> tuple[int | None, int | None]:
        answer = await self.request_json("GET", journal_path(journal_id))
        assert answer["id"] == journal_id
        seq_nr, delete_to = answer["seqNr"], answer["deleteTo"]
        assert seq_nr is None or isinstance(seq_nr, int)
        assert delete_to is None or isinstance(delete_to, int)
        return seq_nr, delete_to

    async def delete(self, journal_id: str, to: int) -> int | None:
        answer = await self.request_json("DELETE", journal_path(journal_id, f"/events?to={to}"))
        delete_to = answer["deleteTo"]
        assert delete_to is None or isinstance(delete_to, int)
        return delete_to

    async def purge(self, journal_id: str) -> None:
        answer = await self.request_json("DELETE", journal_path(journal_id))
        assert set(answer) == {"partition", "offset"}

    async def settle(self) -> None:
        await self._settle()
