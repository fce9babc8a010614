"""Issue 40's model check across two grows: two workers (static membership) serve six clients
(tests/support/http_model.py: each the only client of its journal, verified appends, appends
at the end, deletes, reads, snapshots written and read, every answer checked against what the
client was acknowledged; 503s retried after their Retry-After, as a client must) while the
command grows the topic from 3 to 6 partitions, then from 6 to 12. No wrong answer, no 500;
printed: each journal's longest wait during the moves (its unavailability), p50 and max over
the journals. Every journal then reads back exact through either worker."""

from __future__ import annotations

import asyncio
import random
import statistics
import time

import pytest

from app.grow import grow_topic
from journal.core.grow import Phase
from tests.support.harness import Harness, unique
from tests.support.http_api import client_session
from tests.support.http_model import OPERATION_BOUND_S, Client, Tally
from tests.support.workers import running_workers, wait_settled

pytestmark = pytest.mark.integration

JOURNALS = 6


@pytest.mark.timeout(4 * OPERATION_BOUND_S + 300)
async def test_the_http_model_holds_while_the_topic_grows_twice(
    connected: Harness, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings, store = connected.settings, connected.store
    with running_workers(settings, tmp_path_factory, static_membership=True) as workers:
        await wait_settled(workers)
        tallies = [Tally() for _ in range(JOURNALS)]  # one a journal: its waits are its own
        done = asyncio.Event()
        async with client_session(settings) as session:
            urls = [w.url for w in workers]
            clients = [
                Client(session, urls, tally, random.Random(n), unique("growmodel"), retries=True)
                for n, tally in enumerate(tallies)
            ]
            moves: list[tuple[float, float]] = []

            async def grow_twice() -> None:
                try:
                    await answered(tallies, 50)  # the journals have history in the old topic
                    for partitions in (6, 12):
                        started = time.monotonic()
                        grow = await grow_topic(settings, store, partitions, yes=True, say=print)
                        assert grow is not None and grow.phase is Phase.DONE
                        moves.append((started, time.monotonic()))
                    await answered(tallies, sum(len(t.served) for t in tallies) + 50)  # and after
                finally:
                    done.set()

            async with asyncio.TaskGroup() as group:
                group.create_task(grow_twice())
                for client in clients:
                    group.create_task(client.run(done))
            for client in clients:  # every journal reads back exact through either worker
                for url in urls:
                    client.urls = [url]
                    await client.read()

    wrong = [w for t in tallies for w in t.wrong]
    assert not wrong, wrong[:5]
    assert all(c.last > 0 for c in clients)
    start, end = moves[0][0], moves[-1][1]
    # a journal's unavailability: the longest wait of its operations sent during the moves
    longest = sorted(
        max((s.waited for s in t.served if start <= s.sent < end), default=0.0) for t in tallies
    )
    operations = sum(1 for t in tallies for s in t.served if start <= s.sent < end)
    print(
        f"\nduring the moves ({end - start:.1f} s): {operations} operations; a journal's "
        f"unavailability p50 {statistics.median(longest):.2f} s, max {longest[-1]:.2f} s"
    )


async def answered(tallies: list[Tally], operations: int) -> None:
    """Until the clients had `operations` operations answered (bounded by their own bound)."""
    deadline = time.monotonic() + OPERATION_BOUND_S
    while sum(len(t.served) for t in tallies) < operations:
        assert time.monotonic() < deadline, "the clients' operations stopped being answered"
        await asyncio.sleep(0.05)
