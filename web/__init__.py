"""The HTTP API (v1) as plain aiohttp: views, validation, errors, health, metrics, OpenAPI.

Public: `create_app`, `add_routes` (web.app), `JournalBackend`, `DirectBackend` (web.backend).
Nothing here imports Faust; the worker mounts these routes on its own aiohttp application and
supplies its own backend.
"""

from web.app import add_routes, create_app
from web.backend import DirectBackend, JournalBackend, JournalHandle

__all__ = ["DirectBackend", "JournalBackend", "JournalHandle", "add_routes", "create_app"]
