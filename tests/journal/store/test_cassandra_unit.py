"""The Cassandra store's driver settings that need no server."""

from __future__ import annotations

import itertools

from journal.store.cassandra import reconnection_policy


def test_the_driver_tries_a_host_that_went_down_forever_and_often() -> None:
    delays = list(itertools.islice(reconnection_policy().new_schedule(), 1000))
    assert len(delays) == 1000  # the driver's default gives up after 64
    assert max(delays) <= 10.0  # and backs off to 600 s
