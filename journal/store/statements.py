"""Every CQL statement the Cassandra store runs, prepared once per session (`Statements`),
with the page sizes of its reads. The tables and columns they name are `schema.py`'s."""

from __future__ import annotations

from cassandra.cluster import Session
from cassandra.query import PreparedStatement, SimpleStatement

PAGE_SIZE = 1000  # rows per page of a journal's events and of a partition's stored Appends
SNAPSHOT_HEADERS_PAGE = 32  # headers a `latest_snapshot` pages through: most stop at the first
CHUNKS_PAGE = 4  # chunks per page when a snapshot is read: a few MiB held at a time


class Statements:
    """Every statement the store runs, prepared once."""

    def __init__(self, session: Session, ks: str) -> None:
        def prepare(query: str) -> PreparedStatement:
            return session.prepare(query.format(ks=ks))

        self.pointer = prepare("SELECT offset FROM {ks}.pointers WHERE topic = ? AND partition = ?")
        self.pointers = prepare("SELECT partition, offset FROM {ks}.pointers WHERE topic = ?")
        self.save_pointer = prepare(
            "INSERT INTO {ks}.pointers (topic, partition, offset) VALUES (?, ?, ?) "
            "USING TIMESTAMP ?"
        )
        # `rows.meta_of` takes its columns by position: in this order
        self.meta = prepare(
            "SELECT partition, offset, seq_nr, delete_to, segment_size FROM {ks}.journals "
            "WHERE topic = ? AND id = ?"
        )
        # not prepared: only the pipeline's scans run it, a few times each
        self.journals_in_token_range = SimpleStatement(
            "SELECT topic, id, partition, offset, seq_nr, delete_to, segment_size FROM "
            f"{ks}.journals WHERE token(topic, id) > %s AND token(topic, id) <= %s",
            fetch_size=PAGE_SIZE,
        )
        self.save_meta = prepare(
            "INSERT INTO {ks}.journals "
            "(topic, id, partition, offset, seq_nr, delete_to, segment_size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.list_id = prepare(
            "INSERT INTO {ks}.journal_ids (topic, bucket, id) VALUES (?, ?, ?) USING TIMESTAMP ?"
        )
        self.unlist_id = prepare(
            "DELETE FROM {ks}.journal_ids USING TIMESTAMP ? "
            "WHERE topic = ? AND bucket = ? AND id = ?"
        )
        self._ids: dict[tuple[bool, bool], PreparedStatement] = {}
        for above in (False, True):
            for bounded in (False, True):
                query = "SELECT id FROM {ks}.journal_ids WHERE topic = ? AND bucket = ? AND id "
                query += "> ?" if above else ">= ?"
                self._ids[above, bounded] = prepare(query + (" AND id < ?" if bounded else ""))
        # `rows.event_record_of` takes its columns by position: in this order
        self.read = prepare(
            "SELECT seq_nr, partition, offset, timestamp, tags, payload_type, payload_txt, "
            "payload_bin, expire_after, metadata, headers FROM {ks}.events "
            "WHERE topic = ? AND id = ? AND segment = ? AND seq_nr >= ? AND seq_nr <= ?"
        )
        self.read.fetch_size = PAGE_SIZE
        self.insert_event = prepare(
            "INSERT INTO {ks}.events (topic, id, segment, seq_nr, partition, offset, timestamp, "
            "tags, payload_type, payload_txt, payload_bin, expire_after, metadata, headers) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.insert_append = prepare(
            "INSERT INTO {ks}.appends (topic, partition, bucket, offset, id, first_seq_nr, "
            "last_seq_nr, segment_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self.appends = prepare(
            "SELECT offset, id, first_seq_nr, last_seq_nr, segment_size FROM {ks}.appends "
            "WHERE topic = ? AND partition = ? AND bucket = ? AND offset > ? AND offset <= ?"
        )
        self.appends.fetch_size = PAGE_SIZE
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

    def ids(self, above: bool, bounded: bool) -> PreparedStatement:
        """A bucket's ids from a lower bound (`above`: exclusive), below an upper one if
        `bounded`."""
        return self._ids[above, bounded]
