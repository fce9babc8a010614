"""Waiting for a condition in a test: one helper, bounded, whose failure says what never held.

A test that asserts right after an action what only becomes true later (a replica caught up,
an index past a fence, a counter moved) passes on a fast machine and fails on a slow one. It
awaits the condition instead: `await eventually(check, "what it means")` calls `check` until it
returns something truthy (or, for an assertion-style check, until it stops raising
`AssertionError`), at most `within_s`, then fails naming the condition and the last answer.
The bound is generous (CI is slower than a developer's machine) and never a sleep: a
condition that holds at once costs nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

WITHIN_S = 120.0  # generous: a fresh CI machine is several times slower than a warm one
INTERVAL_S = 0.1


async def eventually(
    check: Callable[[], Awaitable[T]],
    what: str,
    within_s: float = WITHIN_S,
    interval_s: float = INTERVAL_S,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """`check()`'s first truthy answer; an `AssertionError` (or one of `retry_on`) it raises
    counts as "not yet". Past `within_s`: AssertionError naming `what` and the last answer."""
    not_yet: tuple[type[BaseException], ...] = (AssertionError, *retry_on)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        try:
            answer = await check()
        except not_yet as error:
            last: object = error
        else:
            if answer:
                return answer
            last = answer
        if loop.time() >= deadline:
            raise AssertionError(f"never within {within_s:.0f} s: {what} (last: {last!r})")
        await asyncio.sleep(interval_s)


async def answered(
    call: Callable[[], Awaitable[T]],
    what: str,
    retry_on: tuple[type[BaseException], ...],
    within_s: float = WITHIN_S,
    interval_s: float = INTERVAL_S,
) -> T:
    """`call()`'s first answer, whatever it is (an empty one too), retrying it while it raises
    one of `retry_on` (or an `AssertionError`, as `eventually`): a request to a server that
    is down or not ready yet, for one."""

    async def once() -> tuple[T]:
        return (await call(),)

    (answer,) = await eventually(once, what, within_s, interval_s, retry_on)
    return answer
