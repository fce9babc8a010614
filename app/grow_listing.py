"""`kafka-journal schema grow-listing --topic T --buckets N`: the operator's command that grows
a topic's listing (`journal_ids`) to N buckets online, by the protocol of docs/operations.md
("Growing the listing"): record the plan, copy the current generation into the next bucket by
bucket, switch, stop writing the old one, drop its rows.

Every step is decided from the record alone (`journal.core.next_listing_step`): run again with
the same arguments, a run killed anywhere resumes. Before a step that acts on the recorded
phase, a run waits `LEASES_PER_PHASE` leases plus a request's timeout from when it recorded
the phase or (resumed) read it: it cannot know when an earlier run recorded it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from app.confirm import confirm, run_resumable
from journal.core import (
    LEASES_PER_PHASE,
    Listing,
    ListingPhase,
    ListingStep,
    bucket_numbers,
    check_listing_grow,
    listing_target,
    next_listing_step,
)
from journal.errors import InvalidValue
from journal.settings import Settings
from journal.store import CassandraStore

COMMAND = "schema grow-listing"


class ListingGrowRefused(Exception):
    """The record does not allow this grow: nothing (more) changed."""


def phase_wait_s(settings: Settings) -> float:
    """How long after a phase is known every process's view is of it, and every write issued
    under the view before has been answered or has failed (docs/operations.md)."""
    return LEASES_PER_PHASE * settings.listing_lease_s + settings.cassandra_request_timeout_s


def describe(listing: Listing, topic: str, buckets: int) -> str:
    """The record and what the next step would do, naming the partitions a drop deletes."""
    phase = "none" if listing.phase is None else listing.phase.value
    step = next_listing_step(listing, buckets)
    lines = [
        f"listing of {topic}: {listing.current} buckets"
        + (f", other generation {listing.other}" if listing.other is not None else "")
        + f", phase {phase}; next step: {step}"
    ]
    if listing.phase is ListingPhase.GROWING:
        lines.append(f"  copied {len(listing.copied)} of {listing.current} buckets")
    # the generation the grow drops at its end: the current one until the switch
    switched = listing.phase in (ListingPhase.SWITCHED, ListingPhase.DROPPING)
    old = listing.other if switched else listing.current
    if old is not None and step.action != "finished":
        numbers = bucket_numbers(old)
        lines.append(
            f"  the drop deletes the journal_ids partitions (topic {topic!r}, bucket "
            f"{numbers.start}..{numbers.stop - 1}): the {old}-bucket generation, nothing else"
        )
    return "\n".join(lines)


async def grow_listing(
    settings: Settings,
    store: CassandraStore,
    topic: str,
    buckets: int,
    *,
    dry_run: bool = False,
    yes: bool = False,
    before_step: Callable[[ListingStep], Awaitable[None]] | None = None,
    say: Callable[[str], None] = print,
) -> Listing:
    """Grow `topic`'s listing to `buckets`, or resume doing so; the record at the end.
    `before_step`: awaited before each step (tests run a workload there, or fail).
    ListingGrowRefused, NotConfirmed, SetupMissing (no `listing_buckets` table), or
    Unavailable (run it again)."""
    listing = await store.listing(topic)
    target = listing_target(listing)
    if target is not None and target != buckets:
        raise ListingGrowRefused(
            f"a grow of the listing of {topic} to {target} buckets is recorded "
            f"({listing.phase.value if listing.phase else ''}): run it again with --buckets "
            f"{target}"
        )
    if target is None and listing.current != buckets:
        try:
            check_listing_grow(listing, buckets)
        except InvalidValue as error:
            raise ListingGrowRefused(str(error)) from None
    say(describe(listing, topic, buckets))
    if dry_run or next_listing_step(listing, buckets).action == "finished":
        return listing
    confirm(f"Grow the listing of {topic} to {buckets} buckets now?", yes)
    waited_for: tuple[int, int | None, ListingPhase | None] | None = None  # phase waited out
    known = time.monotonic()  # when this run knew the record's phase
    while True:
        step = next_listing_step(listing, buckets)
        if step.action == "finished":
            say(f"done: the listing of {topic} has {listing.current} buckets")
            return listing
        if step.wait and waited_for != _phase_of(listing):
            wait = known + phase_wait_s(settings) - time.monotonic()
            if wait > 0:
                say(f"waiting {wait:.1f} s: every process's view of the {_phase(listing)} phase")
                await asyncio.sleep(wait)
            waited_for = _phase_of(listing)
        if before_step is not None:
            await before_step(step)
        await _take(store, topic, listing, step, buckets, say)
        after = await store.listing(topic)
        if _phase_of(after) != _phase_of(listing):
            known = time.monotonic()
        listing = after


def _phase_of(listing: Listing) -> tuple[int, int | None, ListingPhase | None]:
    return listing.current, listing.other, listing.phase


def _phase(listing: Listing) -> str:
    return listing.phase.value if listing.phase is not None else "none"


async def _take(
    store: CassandraStore,
    topic: str,
    listing: Listing,
    step: ListingStep,
    buckets: int,
    say: Callable[[str], None],
) -> None:
    if step.action == "plan":
        recorded = await store.record_listing_plan(topic, listing, buckets)
        if listing_target(recorded) != buckets:  # another run planned first
            raise ListingGrowRefused(
                f"the listing of {topic} changed meanwhile ({describe(recorded, topic, buckets)})"
            )
        say(f"planned: {listing.current} -> {buckets} buckets; processes now write both")
    elif step.action == "copy":
        assert step.bucket is not None
        started = time.perf_counter()
        ids = await store.copy_listing_bucket(topic, listing, step.bucket)
        await store.record_listing_copied(topic, listing, step.bucket)
        took = time.perf_counter() - started
        say(f"bucket {step.bucket} of {listing.current}: {ids} ids copied ({took:.3f} s)")
    elif step.action == "switch":
        assert listing.other is not None
        switched = Listing(listing.other, listing.current, ListingPhase.SWITCHED)
        await store.record_listing(topic, switched, ListingPhase.GROWING)
        say(f"switched: pages read {listing.other} buckets")
    elif step.action == "stop":
        stopped = Listing(listing.current, listing.other, ListingPhase.DROPPING)
        await store.record_listing(topic, stopped, ListingPhase.SWITCHED)
        say(f"stopped: the {listing.other}-bucket generation is no longer written")
    elif step.action == "drop":
        assert listing.other is not None
        await store.drop_listing_generation(topic, listing.other)
        await store.record_listing(topic, Listing(listing.current), ListingPhase.DROPPING)
        say(f"dropped the {listing.other}-bucket generation's partitions")


def run_grow_listing(settings: Settings, topic: str, buckets: int, dry_run: bool, yes: bool) -> int:
    """The command line's entry (exit codes: `run_resumable`)."""

    async def work(store: CassandraStore) -> None:
        await grow_listing(settings, store, topic, buckets, dry_run=dry_run, yes=yes)

    return run_resumable(COMMAND, settings, work, ListingGrowRefused)
