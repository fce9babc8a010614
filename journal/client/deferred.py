"""A value that exists later: what a Faust worker's agent and views wait for while the core
connects. Unlike a Future it binds to no event loop until it is awaited, so it can be made
before the loop that will run the worker exists."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")


class Deferred(Generic[T]):
    def __init__(self) -> None:
        self._set = asyncio.Event()
        self._value: T | None = None

    def set(self, value: T) -> None:
        self._value = value
        self._set.set()

    def done(self) -> bool:
        return self._set.is_set()

    def value(self) -> T:
        """The value; only once `done()` (a caller that did not check has a bug)."""
        if self._value is None:
            raise RuntimeError("not there yet")
        return self._value

    async def wait(self) -> T:
        await self._set.wait()
        return self.value()
