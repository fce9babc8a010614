"""The listing's generations without I/O (journal/core/listing.py): bucket numbers, what each
phase writes and reads, the command's next step, what it refuses."""

from __future__ import annotations

import zlib

import pytest

from journal.core.listing import (
    MAX_BUCKETS,
    Listing,
    ListingPhase,
    bucket_numbers,
    check_listing_grow,
    listing_bucket,
    next_listing_step,
)
from journal.errors import InvalidValue

IDS = [f"order-{n}" for n in range(2_000)]


def test_a_topic_without_a_record_keeps_todays_buckets() -> None:
    """Rows written before the table existed stay where pages read them: no migration."""
    assert all(listing_bucket(i, 32) == zlib.crc32(i.encode()) % 32 for i in IDS)
    assert Listing().written == (32,) and Listing().current == 32


def test_generations_of_successive_grows_never_share_a_bucket() -> None:
    counts = [32, 64, 128, 512, 2048, MAX_BUCKETS]
    numbers = [set(bucket_numbers(n)) for n in counts]
    for i, a in enumerate(numbers):
        for b in numbers[i + 1 :]:
            assert not a & b
    for n in counts:
        assert {listing_bucket(i, n) for i in IDS} <= set(bucket_numbers(n))


def test_each_phase_writes_and_reads() -> None:
    growing = Listing(32, 64, ListingPhase.GROWING)
    assert (growing.written, growing.current) == ((32, 64), 32)
    switched = Listing(64, 32, ListingPhase.SWITCHED)
    assert (switched.written, switched.current) == ((64, 32), 64)
    dropping = Listing(64, 32, ListingPhase.DROPPING)
    assert (dropping.written, dropping.current) == ((64,), 64)


def test_the_next_step_follows_the_record() -> None:
    assert str(next_listing_step(Listing(), 64)) == "plan"
    growing = Listing(32, 64, ListingPhase.GROWING, frozenset({0, 1, 3}))
    step = next_listing_step(growing, 64)
    assert (step.action, step.bucket, step.wait) == ("copy", 2, True)
    done = Listing(32, 64, ListingPhase.GROWING, frozenset(range(32)))
    assert str(next_listing_step(done, 64)) == "switch"
    assert str(next_listing_step(Listing(64, 32, ListingPhase.SWITCHED), 64)) == "stop"
    assert str(next_listing_step(Listing(64, 32, ListingPhase.DROPPING), 64)) == "drop"
    assert str(next_listing_step(Listing(64), 64)) == "finished"


@pytest.mark.parametrize("buckets", [33, 63, MAX_BUCKETS * 2])
def test_a_grow_at_least_doubles(buckets: int) -> None:
    with pytest.raises(InvalidValue, match="at least twice"):
        check_listing_grow(Listing(), buckets)
    check_listing_grow(Listing(), 64)
