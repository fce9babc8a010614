"""The listing's generations in Cassandra (`listing_buckets`, journal/store/schema.py; the
protocol: docs/operations.md, "Growing the listing", and journal/core/listing.py): read by
replication and by a store's pages of ids through `ListingViews`, written by the
`schema grow-listing` command (app/grow_listing.py) alone, which also copies and drops
generations here."""

from __future__ import annotations

import time
from collections.abc import Callable

from cassandra import InvalidRequest
from cassandra.cluster import Session
from cassandra.query import SimpleStatement

from journal.core.listing import (
    Listing,
    ListingPhase,
    bucket_numbers,
    first_bucket,
    listing_bucket,
)
from journal.errors import StoreUnavailable
from journal.store import cql
from journal.store.schema import SchemaMissing
from journal.store.statements import Statements, idempotent

_DROP_WINDOW = 32  # partition deletions in flight
COPY_STAMP = 0  # below every stamp replication writes (offset + 1): docs/operations.md says why


def _missing_table(error: StoreUnavailable) -> bool:
    """`listing_buckets` is absent: a keyspace at version 3 made before it, not migrated since."""
    return isinstance(error.__cause__, InvalidRequest)


def _listing(current: int | None, other: int | None, phase: str | None) -> Listing:
    if current is None:
        return Listing()
    return Listing(current, other, ListingPhase(phase) if phase is not None else None)


async def read_view(session: Session, keyspace: str, topic: str) -> Listing:
    """What processes need of the record (its generations and phase, not the copy's progress):
    one row. A topic without a record, or a keyspace without the table, has today's 32."""
    try:
        rows = await cql.execute(
            session,
            f"SELECT current, other, phase FROM {keyspace}.listing_buckets "
            "WHERE topic = %s LIMIT 1",
            (topic,),
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        return Listing()
    return _listing(*rows[0]) if rows else Listing()


async def read_listing(session: Session, keyspace: str, topic: str) -> Listing:
    """The whole record, with the buckets the grow copied (one row each)."""
    try:
        rows = await cql.execute(
            session,
            f"SELECT bucket, current, other, phase, copied FROM {keyspace}.listing_buckets "
            "WHERE topic = %s",
            (topic,),
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        return Listing()
    if not rows:
        return Listing()
    listing = _listing(rows[0].current, rows[0].other, rows[0].phase)
    first = first_bucket(listing.current)
    copied = frozenset(
        row.bucket - first
        for row in rows
        if row.copied and row.bucket is not None and row.bucket in bucket_numbers(listing.current)
    )
    return Listing(listing.current, listing.other, listing.phase, copied)


async def record_plan(
    session: Session, keyspace: str, topic: str, listing: Listing, buckets: int
) -> Listing:
    """Record the grow of `listing` (as read) to `buckets` unless another change came first
    (a lightweight transaction); the record as it is then. SchemaMissing without the table."""
    # a topic without a row has no `current`: the condition must then see none
    current = None if listing == Listing() else listing.current
    try:
        await cql.execute(
            session,
            f"UPDATE {keyspace}.listing_buckets SET current = %s, other = %s, phase = %s "
            "WHERE topic = %s IF phase = null AND current = %s",
            (listing.current, buckets, ListingPhase.GROWING.value, topic, current),
        )
    except StoreUnavailable as error:
        if not _missing_table(error):
            raise
        raise SchemaMissing(
            f"keyspace {keyspace} has no listing_buckets table, where the listing's "
            "generations are recorded: kafka-journal schema migrate creates it"
        ) from error
    return await read_listing(session, keyspace, topic)


async def record_copied(
    session: Session, keyspace: str, topic: str, listing: Listing, bucket: int
) -> None:
    await cql.execute(
        session,
        f"UPDATE {keyspace}.listing_buckets SET copied = true WHERE topic = %s AND bucket = %s",
        (topic, first_bucket(listing.current) + bucket),
    )


async def record_generations(
    session: Session, keyspace: str, topic: str, listing: Listing, after: ListingPhase
) -> None:
    """Record the switch, the stop, or the end (`listing`: the record after it) if the phase
    is still `after`: a lightweight transaction, as the plan, so a run resumed on a host whose
    clock is behind the last run's still moves the record on (Paxos orders the writes, not the
    clients' clocks), and two runs at once move it once."""
    phase = listing.phase.value if listing.phase is not None else None
    await cql.execute(
        session,
        f"UPDATE {keyspace}.listing_buckets SET current = %s, other = %s, phase = %s "
        "WHERE topic = %s IF phase = %s",
        (listing.current, listing.other, phase, topic, after.value),
    )


async def copy_bucket(
    session: Session,
    statements: Statements,
    topic: str,
    listing: Listing,
    bucket: int,
    window: int,
) -> int:
    """Copy bucket `bucket` (0-based) of the current generation into the next, a page at a
    time, each id stamped `COPY_STAMP`: every write and delete of replication wins over it.
    The ids copied."""
    assert listing.other is not None
    target, copied = listing.other, 0
    select = statements.ids_of_bucket
    values = (topic, first_bucket(listing.current) + bucket)
    async for page in cql.stream_pages(session, select, values):
        requests = (
            (statements.list_id, (topic, listing_bucket(row.id, target), row.id, COPY_STAMP))
            for row in page
        )
        await cql.execute_in_window(session, requests, window)
        copied += len(page)
    return copied


def drop_statement(keyspace: str, write_level: int | None) -> SimpleStatement:
    """Delete one partition of `journal_ids` whole, at the client's clock (microseconds, far
    above every offset + 1 stamp: no late write of replication shows through)."""
    query = f"DELETE FROM {keyspace}.journal_ids WHERE topic = %s AND bucket = %s"
    return idempotent(query, write_level, unstamped=True)


async def drop_generation(
    session: Session, keyspace: str, write_level: int | None, topic: str, buckets: int
) -> None:
    """Delete the partitions of the generation of `buckets`, and nothing else."""
    delete = drop_statement(keyspace, write_level)
    requests = ((delete, (topic, number)) for number in bucket_numbers(buckets))
    await cql.execute_in_window(session, requests, _DROP_WINDOW)


class ListingViews:
    """Each topic's generations as this process last read them, used for at most `lease_s`
    from the moment that read started, then read again (docs/operations.md, "Growing the
    listing": the command waits out that lease before it acts on a phase)."""

    def __init__(
        self,
        session: Session,
        keyspace: str,
        lease_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session = session
        self._keyspace = keyspace
        self._lease_s = lease_s
        self._clock = clock
        self._views: dict[str, tuple[float, Listing]] = {}

    async def of(self, topic: str) -> Listing:
        started = self._clock()
        held = self._views.get(topic)
        if held is not None and started - held[0] < self._lease_s:
            return held[1]
        listing = await read_view(self._session, self._keyspace, topic)
        self._views[topic] = (started, listing)
        return listing
