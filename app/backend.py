"""The worker as the HTTP API's backend: journals through the core, readiness from Faust.

Any worker answers any journal request correctly: reads on a partition this worker does not
own fall back to the Kafka scan (see tables/head_source.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from web.backend import JournalHandle

if TYPE_CHECKING:
    from app.worker import WorkerContext


class WorkerBackend:
    def __init__(self, app: Any, context: WorkerContext) -> None:
        self._app = app
        self._context = context

    def journal(self, journal_id: str) -> JournalHandle:
        journals = self._context.journals
        if journals is None:  # ready() said no; the views never get here
            raise RuntimeError("the worker is not connected yet")
        return journals.journal(journal_id)

    def ready(self) -> bool:
        return self._context.journals is not None and not self._app.rebalancing
