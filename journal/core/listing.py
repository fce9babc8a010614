"""Growing the listing's buckets online (docs/operations.md, "Growing the listing"), without
I/O: which `journal_ids` partition holds an id in a generation, which generations a process
writes and reads in each phase, and the `schema grow-listing` command's next step, decided
from the record (the keyspace's `listing_buckets`) alone.

A generation is a bucket count. The 32-bucket one keeps today's bucket numbers (0..31), so a
topic without a record is a 32-bucket listing that needs no migration; a generation of n
buckets (n >= 64) uses the numbers n..2n-1. A grow at least doubles the count, so the numbers
of any two generations of a topic never meet (the old one's rows can be dropped whole).

Phases (the record's `phase`; none: not growing, only `current` is written and read):
- GROWING: `next` is recorded: processes write an id in both, read `current`;
- SWITCHED: the copy is done, `next` is the current one: processes read it and still write
  both (a process whose view is one lease old reads the old one, which stays complete);
- DROPPING: processes write the new one only; the command then deletes the old one's rows.
The command waits `LEASES_PER_PHASE` leases (plus a write's timeout) after each phase is
recorded before acting on it, so no process holds a view of the phase before.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from enum import Enum

from journal.errors import InvalidValue

LEGACY_BUCKETS = 32  # a topic without a record: the count every topic had before the grow
MAX_BUCKETS = 1 << 16  # a page reads one slice per bucket: far past any sane count
# the command waits this many `listing_lease_s` after a phase is recorded before acting on it:
# every process's view (a read of the record, used for at most one lease) is then of that
# phase, whatever the drift of two monotonic clocks or a slow read of the record
LEASES_PER_PHASE = 3


class ListingPhase(Enum):
    GROWING = "growing"
    SWITCHED = "switched"
    DROPPING = "dropping"


@dataclass(frozen=True, slots=True)
class Listing:
    """A topic's record: `current` is read; `other` is the next generation while GROWING, the
    old one once SWITCHED or DROPPING; `copied`: the current generation's buckets (0-based)
    copied into the next, while GROWING."""

    current: int = LEGACY_BUCKETS
    other: int | None = None
    phase: ListingPhase | None = None
    copied: frozenset[int] = field(default_factory=frozenset)

    @property
    def written(self) -> tuple[int, ...]:
        """The generations replication writes an id into (and deletes it from)."""
        if self.other is not None and self.phase in (ListingPhase.GROWING, ListingPhase.SWITCHED):
            return (self.current, self.other)
        return (self.current,)


def first_bucket(buckets: int) -> int:
    """The first `journal_ids` bucket number of the generation of `buckets` buckets."""
    return 0 if buckets == LEGACY_BUCKETS else buckets


def listing_bucket(journal_id: str, buckets: int) -> int:
    """The `journal_ids` bucket of an id in the generation of `buckets` buckets: stable across
    processes and versions."""
    return first_bucket(buckets) + zlib.crc32(journal_id.encode("utf-8")) % buckets


def bucket_numbers(buckets: int) -> range:
    """Every `journal_ids` bucket number of a generation."""
    return range(first_bucket(buckets), first_bucket(buckets) + buckets)


def check_listing_grow(listing: Listing, buckets: int) -> None:
    """InvalidValue unless `buckets` may follow the listing's current count."""
    if not 2 * listing.current <= buckets <= MAX_BUCKETS:
        raise InvalidValue(
            f"the listing has {listing.current} buckets: it grows to at least twice as many "
            f"(so two generations' bucket numbers never meet), at most {MAX_BUCKETS}; "
            f"--buckets {buckets} is neither"
        )


@dataclass(frozen=True, slots=True)
class ListingStep:
    """The command's next step: plan, copy (bucket), switch, stop, drop or finished; `wait`:
    the step acts on the recorded phase, so every view must be of it first."""

    action: str
    bucket: int | None = None
    wait: bool = False

    def __str__(self) -> str:
        return self.action if self.bucket is None else f"{self.action} bucket {self.bucket}"


def next_listing_step(listing: Listing, buckets: int) -> ListingStep:
    """The step that brings `listing` towards `buckets` buckets (already checked against a
    record with another target: `check_listing_grow`, the command)."""
    if listing.phase is None:
        return ListingStep("finished") if listing.current == buckets else ListingStep("plan")
    if listing.phase is ListingPhase.GROWING:
        for bucket in range(listing.current):
            if bucket not in listing.copied:
                return ListingStep("copy", bucket, wait=True)
        return ListingStep("switch")
    if listing.phase is ListingPhase.SWITCHED:
        return ListingStep("stop", wait=True)
    return ListingStep("drop", wait=True)


def listing_target(listing: Listing) -> int | None:
    """The count a grow in progress goes to (None: none in progress)."""
    if listing.phase is ListingPhase.GROWING:
        return listing.other
    return listing.current if listing.phase is not None else None
