"""Every CQL statement the Cassandra store runs, prepared once per session (`Statements`),
with the page sizes of its reads. The tables and columns they name are `schema.py`'s.

Every one is idempotent, and marked so (the driver retries and speculates only such
statements, `cluster.py`): a read, or a write whose cells carry `USING TIMESTAMP`, the same
stamp however often it is sent, so a second application changes nothing. `prepare` refuses a
write without one. There are no counters and no lightweight transactions (`IF ...`): neither
could be marked. Writes run at the write consistency; reads at the profile's, the read one."""

from __future__ import annotations

from typing import Any

from cassandra.cluster import Session
from cassandra.query import BatchStatement, BatchType, PreparedStatement, SimpleStatement

PAGE_SIZE = 1000  # rows per page of a journal's events, a partition's stored Appends, pointers
# a read of `event_records` takes rows (Appends) in chunks of about this many events
# (`Reads.read_pages`): rows per chunk follow the last chunk's events per row, so Appends of
# 1,000 events take a few rows a chunk, appends of one up to `RECORDS_PAGE`; a reader holds
# two chunks (one read ahead), whatever the Appends' size (a page of 500 rows held 500,000
# events of 1,000-event Appends: 2.8 GB in a worker streaming a 1,000,000-event journal)
READ_CHUNK_EVENTS = 5_000
RECORDS_PAGE = 500  # rows of a chunk at most
# a read's speculative first page (`Reads.first_page`), asked with the journal's row, before
# any row tells the Appends' size: the rows ending within this many seqNrs from the read's
# start, so it holds at most this many events from there, whatever the Appends' size, plus
# the part below the start of the row holding it (one Append's, dropped once decoded). A
# journal up to it (100 events in Appends of 10) is read in this one request: at 8 rows,
# version 4's first bound, its 10 rows took two and its read's p50 rose 1.35 -> 1.75 ms
# (issue 42), and 8 rows of 1,000-event Appends held 8,000 events: now a fifth of a chunk
# (`READ_CHUNK_EVENTS`) at most
FIRST_EVENTS = 1_000
# rows of a segment's first chunk in `Reads.read_pages` before a chunk tells the Appends' size
FIRST_CHUNK_ROWS = 8
SNAPSHOT_HEADERS_PAGE = 32  # headers a `latest_snapshot` pages through: most stop at the first
CHUNKS_PAGE = 4  # chunks per page when a snapshot is read: a few MiB held at a time


def mark(statement: Any, query: str, write_level: int | None, *, unstamped: bool = False) -> Any:
    """`statement` marked idempotent, at `write_level` if `query` writes (module docstring):
    a write must be stamped, else it is refused here, at preparation; `unstamped` for a write
    of fixed values that no other write of the row can race (the driver's client timestamp,
    taken once per request, is the same for its retries)."""
    if not query.lstrip().upper().startswith("SELECT"):
        stamped = unstamped or "USING TIMESTAMP" in query.upper()
        if not stamped or " IF " in f" {query.upper()} ":
            raise ValueError(f"not idempotent, so not for the store: {query}")
        statement.consistency_level = write_level
    statement.is_idempotent = True
    return statement


def idempotent(query: str, write_level: int | None, *, unstamped: bool = False) -> SimpleStatement:
    """An unprepared statement, marked as `mark` does (for the few not worth preparing)."""
    return mark(SimpleStatement(query), query, write_level, unstamped=unstamped)


def unlogged_batch(write_level: int | None) -> BatchStatement:
    """A batch for the store's writes only (each idempotent): so is the batch."""
    batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=write_level)
    batch.is_idempotent = True
    return batch


class Statements:
    """Every statement the store runs, prepared once; writes at `write_level` (the driver's
    consistency value; None: the profile's)."""

    def __init__(self, session: Session, ks: str, write_level: int | None = None) -> None:
        self.write_level = write_level

        def prepare(query: str) -> PreparedStatement:
            return mark(session.prepare(query.format(ks=ks)), query, write_level)

        # pointers live in `pointers2`; `pointers` (version 2's) is written too, and read only
        # for a topic without a recorded partition count (schema.py)
        self.pointer = prepare(
            "SELECT offset FROM {ks}.pointers2 WHERE topic = ? AND partition = ?"
        )
        self.legacy_pointers = prepare(
            "SELECT partition, offset FROM {ks}.pointers WHERE topic = ?"
        )
        self.legacy_pointers.fetch_size = PAGE_SIZE
        self.save_pointer = prepare(
            "INSERT INTO {ks}.pointers2 (topic, partition, offset) VALUES (?, ?, ?) "
            "USING TIMESTAMP ?"
        )
        self.save_legacy_pointer = prepare(
            "INSERT INTO {ks}.pointers (topic, partition, offset) VALUES (?, ?, ?) "
            "USING TIMESTAMP ?"
        )
        self.partition_count = prepare(
            "SELECT partitions FROM {ks}.topic_partitions WHERE topic = ?"
        )
        # `rows.meta_of` takes its columns by position: in this order
        self.meta = prepare(
            "SELECT partition, offset, seq_nr, delete_to, segment_size, records_from, base "
            "FROM {ks}.journals WHERE topic = ? AND id = ?"
        )
        # not prepared: only the pipeline's scans run it, a few times each
        self.journals_in_token_range = idempotent(
            "SELECT topic, id, partition, offset, seq_nr, delete_to, segment_size, records_from, "
            f"base FROM {ks}.journals WHERE token(topic, id) > %s AND token(topic, id) <= %s",
            write_level,
        )
        self.journals_in_token_range.fetch_size = PAGE_SIZE
        self.save_meta = prepare(
            "INSERT INTO {ks}.journals "
            "(topic, id, partition, offset, seq_nr, delete_to, segment_size, records_from, base) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.list_id = prepare(
            "INSERT INTO {ks}.journal_ids (topic, bucket, id) VALUES (?, ?, ?) USING TIMESTAMP ?"
        )
        self.unlist_id = prepare(
            "DELETE FROM {ks}.journal_ids USING TIMESTAMP ? "
            "WHERE topic = ? AND bucket = ? AND id = ?"
        )
        # a bucket whole, for the listing's grow (journal/store/listing.py): a page at a time
        self.ids_of_bucket = prepare(
            "SELECT id FROM {ks}.journal_ids WHERE topic = ? AND bucket = ?"
        )
        self.ids_of_bucket.fetch_size = PAGE_SIZE
        self._ids: dict[tuple[bool, bool], PreparedStatement] = {}
        for above in (False, True):
            for bounded in (False, True):
                query = "SELECT id FROM {ks}.journal_ids WHERE topic = ? AND bucket = ? AND id "
                query += "> ?" if above else ">= ?"
                self._ids[above, bounded] = prepare(query + (" AND id < ?" if bounded else ""))
        # version 3's `events` rows, one per event: written no more (schema.py), still read,
        # deleted and purged below a journal's `records_from`.
        # `rows.event_records_of` takes its columns by position: in this order. The tags as
        # JSON text (issue 42): the driver decodes a set<text> into its pure-Python SortedSet,
        # two tracked objects and ~2 us a row of a long read; a text costs it nothing
        self.read = prepare(
            "SELECT seq_nr, partition, offset, timestamp, toJson(tags), payload_type, payload_txt, "
            "payload_bin, expire_after, metadata, headers FROM {ks}.events "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr >= ? AND seq_nr <= ?"
        )
        self.read.fetch_size = PAGE_SIZE
        # version 4's rows, one per Append (schema.py); `rows.records_events` takes the
        # columns by position: in this order
        records = (
            "SELECT last_seq_nr, seq_nr, partition, offset, timestamp, payload_type, events, "
            "headers FROM {ks}.event_records WHERE topic = ? AND id = ? AND segment = ? "
        )
        self.read_records = prepare(records + "AND last_seq_nr >= ? LIMIT ?")
        self.read_records.fetch_size = RECORDS_PAGE  # a chunk is one page
        self.first_records = prepare(records + "AND last_seq_nr >= ? AND last_seq_nr <= ?")
        self.first_records.fetch_size = FIRST_EVENTS  # the rows of its range: one page
        self.append_record = prepare(records + "AND last_seq_nr = ?")
        self.insert_record = prepare(
            "INSERT INTO {ks}.event_records (topic, id, segment, last_seq_nr, seq_nr, partition, "
            "offset, timestamp, payload_type, events, headers) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.record_offsets = prepare(
            "SELECT seq_nr, last_seq_nr, offset FROM {ks}.event_records "
            "WHERE topic = ? AND id = ? AND segment = ? AND last_seq_nr >= ?"
        )
        self.record_offsets.fetch_size = PAGE_SIZE
        self.delete_record_segment = prepare(
            "DELETE FROM {ks}.event_records USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND segment = ?"
        )
        self.delete_record_rows = prepare(
            "DELETE FROM {ks}.event_records USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND segment = ? AND last_seq_nr <= ?"
        )
        # TTL 0: none (`appends_ttl_s`)
        self.insert_append = prepare(
            "INSERT INTO {ks}.appends (topic, partition, bucket, offset, id, first_seq_nr, "
            "last_seq_nr, segment_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?"
        )
        self.appends = prepare(
            "SELECT offset, id, first_seq_nr, last_seq_nr, segment_size FROM {ks}.appends "
            "WHERE topic = ? AND partition = ? AND bucket = ? AND offset > ? AND offset <= ?"
        )
        self.appends.fetch_size = PAGE_SIZE
        # the offsets of a journal's stored events, for the `appends` rows a Delete or Purge
        # removes (`writes.Writes.remove_appends`)
        self.event_offsets = prepare(
            "SELECT offset FROM {ks}.events "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr >= ? AND seq_nr <= ?"
        )
        self.event_offsets.fetch_size = PAGE_SIZE
        self.delete_append = prepare(
            "DELETE FROM {ks}.appends USING TIMESTAMP ? "
            "WHERE topic = ? AND partition = ? AND bucket = ? AND offset = ?"
        )
        self.delete_segment = prepare(
            "DELETE FROM {ks}.events USING TIMESTAMP ? WHERE topic = ? AND id = ? AND segment = ?"
        )
        self.insert_snapshot_chunk = prepare(
            "INSERT INTO {ks}.snapshot_chunks (topic, id, seq_nr, mark, chunk, data) "
            "VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.insert_snapshot = prepare(
            "INSERT INTO {ks}.snapshots "
            "(topic, id, seq_nr, mark, timestamp, payload_type, size, chunks) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.delete_replaced_chunks = prepare(
            "DELETE FROM {ks}.snapshot_chunks USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND seq_nr = ? AND mark < ?"
        )
        self.snapshot_mark = prepare(
            "SELECT mark FROM {ks}.snapshots WHERE topic = ? AND id = ? AND seq_nr = ?"
        )
        self.snapshot_headers = prepare(
            "SELECT seq_nr, mark, timestamp, payload_type, size, chunks FROM {ks}.snapshots "
            "WHERE topic = ? AND id = ? AND seq_nr <= ? ORDER BY seq_nr DESC"
        )
        self.snapshot_headers.fetch_size = SNAPSHOT_HEADERS_PAGE
        self.snapshot_chunks = prepare(
            "SELECT data FROM {ks}.snapshot_chunks "
            "WHERE topic = ? AND id = ? AND seq_nr = ? AND mark = ?"
        )
        self.snapshot_chunks.fetch_size = CHUNKS_PAGE
        self.delete_snapshots = prepare(
            "DELETE FROM {ks}.snapshots USING TIMESTAMP ? WHERE topic = ? AND id = ? "
            "AND seq_nr <= ?"
        )
        self.delete_snapshot_chunks = prepare(
            "DELETE FROM {ks}.snapshot_chunks USING TIMESTAMP ? WHERE topic = ? AND id = ? "
            "AND seq_nr <= ?"
        )
        self.purge_snapshots = prepare(
            "DELETE FROM {ks}.snapshots USING TIMESTAMP ? WHERE topic = ? AND id = ?"
        )
        self.purge_snapshot_chunks = prepare(
            "DELETE FROM {ks}.snapshot_chunks USING TIMESTAMP ? WHERE topic = ? AND id = ?"
        )
        self.delete_rows = prepare(
            "DELETE FROM {ks}.events USING TIMESTAMP ? "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr <= ?"
        )

    def batch(self) -> BatchStatement:
        """An unlogged batch of this store's writes (`unlogged_batch`)."""
        return unlogged_batch(self.write_level)

    def ids(self, above: bool, bounded: bool) -> PreparedStatement:
        """A bucket's ids from a lower bound (`above`: exclusive), below an upper one if
        `bounded`."""
        return self._ids[above, bounded]
