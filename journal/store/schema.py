"""The Cassandra schema of the eventual store, created and versioned at start.

Tables:
- `events`: one row per event; partitioned by (topic, id, segment) so a huge journal spreads
  over partitions of at most `segment_size` events each.
- `journals`: one row per journal: partition, offset of its last replicated action, last seqNr,
  deleteTo, segment size (fixed when the journal is first written).
- `journal_ids`: the ids of the journals that exist (`JournalState.exists`), for listing
  them by prefix in id order. Partitioned by (topic, bucket), `BUCKETS` buckets by a hash of
  the id, clustered by id: a page is one slice query per bucket (`prefix <= id < successor`,
  `id > after`), merged in order, so no query scans the table, and no partition grows with
  the topic alone: one holds 1/`BUCKETS` of its journals (~1M rows, ~50 MB, at 32M
  journals). Buckets by the id's first characters would serve a prefix from one partition,
  but ids share prefixes (`order-...`): one bucket would hold nearly all of them, forever.
  Replication writes a row when a journal comes to exist and deletes it when a Purge empties
  it, from the fold's `before` and `after` states, so it never reads the table.
- `pointers`: per (topic, partition), the offset of the last replicated record.
- `schema_version`: the version of this schema; a newer one is refused.

Every write of replication carries `USING TIMESTAMP offset + 1` (the Kafka offset of the action
that caused it). One journal lives in one partition, so its offsets order its changes: a replayed
old batch can never overwrite newer cells nor resurrect what a later Delete or Purge removed,
and a rebuild from Kafka produces the very same cells.
"""

from __future__ import annotations

import zlib

from cassandra.cluster import Session

from journal.store import cql

SCHEMA_VERSION = 2  # 2: journal_ids
BUCKETS = 32  # of journal_ids per topic; changing it needs a rewrite of the table

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {ks}.events (
        topic text, id text, segment bigint, seq_nr bigint,
        partition int, offset bigint, timestamp timestamp,
        tags set<text>, payload_type text, payload_txt text, payload_bin blob,
        expire_after text, metadata text, headers map<text, text>,
        PRIMARY KEY ((topic, id, segment), seq_nr))""",
    """CREATE TABLE IF NOT EXISTS {ks}.journals (
        topic text, id text, partition int, offset bigint,
        seq_nr bigint, delete_to bigint, segment_size bigint,
        PRIMARY KEY ((topic, id)))""",
    """CREATE TABLE IF NOT EXISTS {ks}.journal_ids (
        topic text, bucket int, id text,
        PRIMARY KEY ((topic, bucket), id))""",
    """CREATE TABLE IF NOT EXISTS {ks}.pointers (
        topic text, partition int, offset bigint,
        PRIMARY KEY ((topic), partition))""",
    """CREATE TABLE IF NOT EXISTS {ks}.schema_version (
        name text PRIMARY KEY, version int)""",
)


class SchemaTooNew(RuntimeError):
    """The keyspace was created by a newer version of this project."""


async def ensure_schema(session: Session, keyspace: str, replication: str) -> None:
    """Create the keyspace and tables if missing; refuse a schema newer than this code's."""
    await cql.execute(
        session,
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication}",
    )
    for table in _TABLES:
        await cql.execute(session, table.format(ks=keyspace))
    rows = await cql.execute(
        session, f"SELECT version FROM {keyspace}.schema_version WHERE name = 'journal'"
    )
    if rows and rows[0].version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"keyspace {keyspace} has schema version {rows[0].version}; "
            f"this code knows up to {SCHEMA_VERSION}"
        )
    if rows and rows[0].version == 1:
        await _fill_journal_ids(session, keyspace)
    if not rows or rows[0].version < SCHEMA_VERSION:
        await cql.execute(
            session,
            f"INSERT INTO {keyspace}.schema_version (name, version) VALUES ('journal', %s)",
            (SCHEMA_VERSION,),
        )


def id_bucket(journal_id: str) -> int:
    """The `journal_ids` bucket of an id: stable across processes and versions."""
    return zlib.crc32(journal_id.encode("utf-8")) % BUCKETS


async def _fill_journal_ids(session: Session, keyspace: str) -> None:
    """Version 1 had no `journal_ids`: list every existing journal once (stamped as
    replication stamps them, so a concurrent replication's later writes win)."""
    insert = (
        f"INSERT INTO {keyspace}.journal_ids (topic, bucket, id) VALUES (%s, %s, %s) "
        "USING TIMESTAMP %s"
    )
    rows = cql.stream(session, f"SELECT topic, id, offset, seq_nr FROM {keyspace}.journals")
    async for row in rows:
        if row.seq_nr:
            values = (row.topic, id_bucket(row.id), row.id, row.offset + 1)
            await cql.execute(session, insert, values)
