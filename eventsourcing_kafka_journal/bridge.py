"""The synchronous recorders' way into the asyncio core: one event loop on one thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running on a thread of its own until `close`.

    Recorders call `run` from any thread (the library's applications are multi-threaded); the
    coroutine runs on the loop, so the core's objects are only ever touched by that thread.
    """

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coroutine` on the loop and wait for its result (its exception raises here)."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a recorder was called from its own event loop thread")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join the thread."""
        if not self._thread.is_alive():
            return
        self.run(_cancel_others())
        self.run(self._loop.shutdown_default_executor())  # asyncio.to_thread's threads
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()


async def _cancel_others() -> None:
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
