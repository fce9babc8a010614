"""The HTTP API's limits and their defaults, written once: the worker's settings
(app/settings.py) and the routes (web/app.py, web/views.py) take them from here. No aiohttp
here, so the settings load it without the web's imports."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BODY_BYTES = 4 * 2**20  # a request's body (a snapshot's allows its payload's limit)
DEFAULT_RETRY_AFTER_S = 1  # a 503's Retry-After
DEFAULT_MAX_GROUP_STREAMS = 64  # group members streamed at once, each a Kafka consumer


@dataclass(frozen=True, slots=True)
class Limits:
    """Knobs of the journal routes: `max_group_streams`, the group members this process
    streams at once (each is a Kafka consumer), the next answered 503 `group_streams_full`."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    retry_after_s: int = DEFAULT_RETRY_AFTER_S
    max_group_streams: int = DEFAULT_MAX_GROUP_STREAMS
