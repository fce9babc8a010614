"""Two workers of one fresh Faust app, shared by the modules that serve the suite over both.

`workers` is module-scoped, as the `connected` harness it starts them on (tests/conftest.py);
`static_workers` the same with static membership (a killed worker, restarted at once, takes its
partitions back without a rebalance): the chaos modules'. A module that needs them otherwise
(HTTP security) defines its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.support.harness import Harness
from tests.support.workers import WorkerProcess, running_workers, wait_settled


@pytest.fixture(scope="module")
async def workers(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[WorkerProcess]]:
    """Started, and settled: both ready, the partitions split between them."""
    with running_workers(connected.settings, tmp_path_factory) as both:
        await wait_settled(both)
        yield both


@pytest.fixture(scope="module")
def static_workers(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[WorkerProcess]]:
    with running_workers(connected.settings, tmp_path_factory, static_membership=True) as both:
        yield both
