"""The Cassandra store's driver settings that need no server."""

from __future__ import annotations

import asyncio
import itertools

from journal.store.base import EventualStore
from journal.store.cassandra import CassandraStore
from journal.store.cluster import reconnection_policy
from journal.store.cql import in_window


def test_the_driver_tries_a_host_that_went_down_forever_and_often() -> None:
    delays = list(itertools.islice(reconnection_policy().new_schedule(), 1000))
    assert len(delays) == 1000  # the driver's default gives up after 64
    assert max(delays) <= 10.0  # and backs off to 600 s


async def test_requests_run_at_most_a_window_at_a_time_in_no_more_lanes_than_requests() -> None:
    running, most, most_tasks = 0, 0, 0
    done: list[int] = []
    lanes: set[asyncio.Task[object] | None] = set()
    tasks_before = len(asyncio.all_tasks())

    async def run(item: int) -> None:
        nonlocal running, most, most_tasks
        running += 1
        most = max(most, running)
        most_tasks = max(most_tasks, len(asyncio.all_tasks()) - tasks_before)
        lanes.add(asyncio.current_task())
        await asyncio.sleep(0)  # let the other lanes start theirs
        running -= 1
        done.append(item)

    await in_window(run, iter(range(10)), window=3)
    assert sorted(done) == list(range(10)) and most == 3 and len(lanes) == 3

    lanes.clear()
    await in_window(run, [7], window=64)  # one request: no task of its own
    assert lanes == {asyncio.current_task()}

    most_tasks = 0
    await in_window(run, range(2), window=64)  # two requests: two lanes, not 64
    assert most_tasks == 2


def test_the_store_adds_to_the_eventual_store_only_what_the_product_uses() -> None:
    """No doors for tests, benchmarks or other modules' tables: they go through
    `keyspace_access` (tests/support/raw_store.py, bench/, eventsourcing_kafka_journal/)."""
    own = {name for name in vars(CassandraStore) if not name.startswith("_")}
    assert own - set(dir(EventualStore)) == {
        "connect",  # the product's way in
        "journals_in_token_range",  # the Spark pipeline's scans
        "keyspace_access",  # tables that are not the store's
        "predecessors",  # the export's chain of grows, for the data keys (pipeline/export.py)
        # the listing's generations: Cassandra's buckets, grown by `schema grow-listing`
        # (app/grow_listing.py), which runs on Cassandra only
        "listing",
        "record_listing_plan",
        "record_listing_copied",
        "record_listing",
        "copy_listing_bucket",
        "drop_listing_generation",
    }
