"""The HTTP API (v1) as plain aiohttp: views, validation, errors, health, metrics, OpenAPI.

Public: `create_app`, `add_routes` (web.app), `JournalBackend`, `DirectBackend` (web.backend).
Nothing here imports Faust; the worker mounts these routes on its own aiohttp application and
supplies its own backend.
"""

from typing import TYPE_CHECKING

from journal.doors import door

if TYPE_CHECKING:
    from web.app import add_routes, create_app
    from web.backend import DirectBackend, JournalBackend, JournalHandle

# loaded on first use: `web.limits` (the settings') loads no aiohttp
__getattr__ = door(
    __name__,
    {
        "DirectBackend": "backend",
        "JournalBackend": "backend",
        "JournalHandle": "backend",
        "add_routes": "app",
        "create_app": "app",
    },
)
__all__ = ["DirectBackend", "JournalBackend", "JournalHandle", "add_routes", "create_app"]
