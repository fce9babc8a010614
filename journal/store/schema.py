"""The Cassandra schema of the eventual store, created and versioned at start.

Tables:
- `event_records` (version 4): one row per stored Append, its events as Kafka holds them (the
  record value: `payload_type` says json or binary, journal/codec/), with the record's
  partition, offset, timestamp and user headers, and its first and last seqNr. Partitioned by
  (topic, id, segment) where segment is the *last* seqNr // `segment_size`, clustered by that
  last seqNr: the row holding a seqNr s is the first with last_seq_nr >= s, so a read starts at
  the row holding deleteTo + 1 (or `from_`) with one slice per segment, and yields only the
  events at or above it (a row straddling deleteTo is sliced). A Delete removes the segments
  wholly at or below its deleteTo as partition deletions, and the rows `last_seq_nr <= to` of
  the one it falls in: a straddling row stays, its events above deleteTo still to read.
  Why (issue 42, profiled): a long read cost one Cassandra row per event, fetched and decoded by
  the driver in Python (15 values), and replication paid the same to serialise them (37.5% of
  a worker's replication time); one row per Append is ~10x fewer rows at appends of 10, and the
  record value decodes in one msgspec pass, as a read of Kafka's records does. Encrypted
  payloads stay sealed in the value as Kafka has them (docs/erasure.md).
- `events` (versions 1 to 3): one row per event; partitioned by (topic, id, segment =
  seqNr // `segment_size`). Version 4 writes no new rows there: a journal's row
  (`journals.records_from`) says from which seqNr its events are in `event_records`, those
  below are read, deleted and purged here as before, so a keyspace of version 3 needs no
  rewrite.
- `journals`: one row per journal: partition, offset of its last replicated action, last seqNr,
  deleteTo, segment size (fixed when the journal is first written), `records_from` (version 4:
  its events from this seqNr on are in `event_records`; null in a row of version 3, read as
  the seqNr after its last: all of them in `events`; a Purge sets it back to 1), `base`
  (version 4 too, added to a keyspace at version 4 made before it: a journal moved into a
  grown topic, the last seqNr of its events in the old topic, read there; 0 or null for
  none; docs/growing.md).
- `journal_ids`: the ids of the journals that exist (`JournalState.exists`), for listing
  them by prefix in id order. Partitioned by (topic, bucket), the topic's bucket count
  (`listing_buckets`: 32 unless grown) by a hash of the id, clustered by id: a page is one
  slice query per bucket (`prefix <= id < successor`, `id > after`), merged in order, so no
  query scans the table, and no partition grows with the topic alone: one holds 1/buckets
  of its journals (~1M rows, ~50 MB, at 32M
  journals). Buckets by the id's first characters would serve a prefix from one partition,
  but ids share prefixes (`order-...`): one bucket would hold nearly all of them, forever.
  Replication writes a row when a journal comes to exist and deletes it when a Purge empties
  it, from the fold's `before` and `after` states, so it never reads the table.
- `pointers2` (version 3): per (topic, partition), the offset of the last replicated record,
  one Cassandra partition each, so no partition is written by every replicating worker and read
  by every client; all of a topic's are read one partition at a time over its recorded count
  (`topic_partitions`). `pointers`, the table before it (all of a topic's in one partition),
  is still written beside it while version 2 processes may run (a rolling upgrade: they read
  only it), and read where a topic has no count recorded; a later version stops writing it.
- `appends`: per (topic, partition), the Appends replication stored, by offset (buckets of
  `APPEND_BUCKET` offsets per Cassandra partition): which records a subscription delivers from
  the replicated part of the log without folding it again. Bounded by the events: a row goes
  when a Delete or Purge removes the last of its Append's events (`JournalWrite.removal`:
  replication reads the removed events' offsets, a page at a time, and deletes those rows
  stamped with the Delete's or Purge's offset + 1), so the table holds one row per Append
  with an event still stored (plus the rows of Appends removed before this rule existed:
  harmless, a reader finds no events by them). No version bump: older code reads the table
  as before, and a row it would have kept names events already gone.
- `snapshots`: one row per snapshot of a journal (its header: Mark, kind, size, chunk count),
  written once its chunks are; `snapshot_chunks`: its payload, in chunks of at most
  `snapshot_chunk_bytes`, under the (seqNr, Mark) of the put that wrote them, so a header only
  ever names chunks of its own put. Each put's cells carry `USING TIMESTAMP mark + 1` (the
  offset of the Mark the put produced): a later put, a delete of snapshots (its own Mark) and
  a Purge applied by replication (its offset + 1) win exactly over what precedes them in the
  log, so a snapshot taken before a Purge can never come back, however late it is written.
- `schema_version`: the version of this schema; a newer one is refused. Version 2 added the
  snapshots: version 1 code would apply a Purge without removing them, so it must refuse.
  Version 3 added `pointers2` and each table's compaction and `gc_grace_seconds`
  (`TABLE_OPTIONS`); a version 2 process that is running when the version moves on keeps
  running (it writes what it wrote, and readers of version 3 see its pointers late, never
  early: `migrate` says why that is safe), one that starts afterwards refuses.
  Version 4 added `event_records` and `journals.records_from`. Not a rolling upgrade: a
  version 3 process would write events where version 4 readers no longer look for them, and
  read a journal's row without finding its newer events, so every version 3 process stops
  before `migrate` runs (a version 3 process that starts afterwards refuses, as above);
  docs/operations.md, "Upgrading the schema", has the steps. The migration itself is additive
  and quick: no row is rewritten.
- `topic_partitions`: per topic, the partition count the journal's processes use
  (journal/kafka/guard.py): a journal lives in the partition its key maps to under this count,
  so a process that finds the topic with another count refuses it. Written once, by the first
  process that starts on the topic (`INSERT ... IF NOT EXISTS`), so a keyspace of an earlier
  version gets its row at its first start. Kafka's topic id is not recorded: aiokafka 0.14
  speaks metadata up to v5, and topic ids came with v10; the topic's name keys the row. No
  version bump: older code never reads it, so nothing older must refuse it.
- `journal_keys`: per journal of an encrypting deployment, its data key wrapped by the
  key-encryption key and the state of its erasure (journal/store/keys.py, docs/erasure.md).
  Changed only by lightweight transactions. No version bump: older code never reads it; a
  keyspace an administrator made before it gets it from `ensure_schema` (`stack up`, or a
  process that creates schema).
- `listing_buckets`: per topic, the generations of `journal_ids` (journal/core/listing.py,
  docs/operations.md "Growing the listing"): the current bucket count, while growing the next
  (or, after the switch, the old) one and the phase (static), and per bucket of the current
  one whether the grow copied it. A topic without a row has 32 buckets, numbered 0..31 as
  before it existed; a generation of n buckets is numbered n..2n-1. No version bump, as
  `topic_grow` below: older code never reads it; `migrate` creates it where missing.
- `topic_grow`: the registry of a grow of a topic (OLD) into a larger one (NEW,
  docs/growing.md, journal/core/grow.py): NEW, its count and the phase (static), and per old
  partition `low` (its end just before sealing) and `cut` (its first Seal's offset). No version
  bump: older code never reads it. It came after version 3, so a keyspace already at version 3
  may lack it: `migrate` creates whichever of the tables a keyspace at this version lacks
  (`kafka-journal schema migrate`, or a process that creates schema, at start).
- `deadlines_carried`: per grown topic, workers' app and partition of it, that the expiry
  candidates set before the move were carried into that app's expiry tables there
  (docs/growing.md, "Deadlines set before the move"). No version bump, as `topic_grow`.

Code above the store may keep tables of its own in the keyspace (through
`CassandraStore.keyspace_access`): it creates them, this module neither creates nor versions
them, and the version above is the journal's tables' only: code that does not know such a table
never touches it, so nothing older must refuse it.

Every write of replication carries `USING TIMESTAMP offset + 1` (the Kafka offset of the action
that caused it). One journal lives in one partition, so its offsets order its changes: a replayed
old batch can never overwrite newer cells nor resurrect what a later Delete or Purge removed,
and a rebuild from Kafka produces the very same cells.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cassandra import InvalidRequest
from cassandra.cluster import Cluster, Session

from journal.core.listing import LEGACY_BUCKETS, listing_bucket
from journal.errors import SetupMissing, StoreUnavailable
from journal.store import cql
from journal.store.topology import auto_replication, cql_map, parse_replication, replicas_per_dc

log = logging.getLogger(__name__)

# 2: appends, snapshots, journal_ids; 3: pointers2, compaction, gc_grace; 4: event_records
SCHEMA_VERSION = 4
APPEND_BUCKET = 100_000  # offsets per Cassandra partition of `appends`
BUCKETS = LEGACY_BUCKETS  # of journal_ids per topic until grown (`listing_buckets`)

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {ks}.events (
        topic text, id text, segment bigint, seq_nr bigint,
        partition int, offset bigint, timestamp timestamp,
        tags set<text>, payload_type text, payload_txt text, payload_bin blob,
        expire_after text, metadata text, headers map<text, text>,
        PRIMARY KEY ((topic, id, segment), seq_nr))""",
    """CREATE TABLE IF NOT EXISTS {ks}.event_records (
        topic text, id text, segment bigint, last_seq_nr bigint, seq_nr bigint,
        partition int, offset bigint, timestamp timestamp,
        payload_type text, events blob, headers map<text, text>,
        PRIMARY KEY ((topic, id, segment), last_seq_nr))""",
    """CREATE TABLE IF NOT EXISTS {ks}.journals (
        topic text, id text, partition int, offset bigint,
        seq_nr bigint, delete_to bigint, segment_size bigint, records_from bigint, base bigint,
        PRIMARY KEY ((topic, id)))""",
    """CREATE TABLE IF NOT EXISTS {ks}.journal_ids (
        topic text, bucket int, id text,
        PRIMARY KEY ((topic, bucket), id))""",
    """CREATE TABLE IF NOT EXISTS {ks}.pointers (
        topic text, partition int, offset bigint,
        PRIMARY KEY ((topic), partition))""",
    """CREATE TABLE IF NOT EXISTS {ks}.pointers2 (
        topic text, partition int, offset bigint,
        PRIMARY KEY ((topic, partition)))""",
    """CREATE TABLE IF NOT EXISTS {ks}.appends (
        topic text, partition int, bucket bigint, offset bigint,
        id text, first_seq_nr bigint, last_seq_nr bigint, segment_size bigint,
        PRIMARY KEY ((topic, partition, bucket), offset))""",
    """CREATE TABLE IF NOT EXISTS {ks}.snapshots (
        topic text, id text, seq_nr bigint, mark bigint, timestamp timestamp,
        payload_type text, size bigint, chunks int,
        PRIMARY KEY ((topic, id), seq_nr))""",
    """CREATE TABLE IF NOT EXISTS {ks}.snapshot_chunks (
        topic text, id text, seq_nr bigint, mark bigint, chunk int, data blob,
        PRIMARY KEY ((topic, id), seq_nr, mark, chunk))""",
    """CREATE TABLE IF NOT EXISTS {ks}.schema_version (
        name text PRIMARY KEY, version int)""",
    """CREATE TABLE IF NOT EXISTS {ks}.topic_partitions (
        topic text PRIMARY KEY, partitions int, recorded_at timestamp)""",
    """CREATE TABLE IF NOT EXISTS {ks}.journal_keys (
        topic text, id text, state text, wrapped blob, kek_id text,
        created_at timestamp, erasing_at timestamp, erased_at timestamp,
        PRIMARY KEY ((topic, id)))""",
    """CREATE TABLE IF NOT EXISTS {ks}.listing_buckets (
        topic text, bucket int, current int static, other int static, phase text static,
        copied boolean, PRIMARY KEY (topic, bucket))""",
    """CREATE TABLE IF NOT EXISTS {ks}.topic_grow (
        topic text, partition int, new_topic text static, partitions int static,
        phase text static, low bigint, cut bigint, PRIMARY KEY (topic, partition))""",
    """CREATE TABLE IF NOT EXISTS {ks}.deadlines_carried (
        topic text, app text, partition int, carried_at timestamp,
        PRIMARY KEY ((topic, app), partition))""",
)


class SchemaTooNew(SetupMissing):
    """The keyspace was created by a newer version of this project."""


class SchemaMissing(SetupMissing):
    """The keyspace or its tables do not exist, and this process may not create them."""


# a schema change is answered once the nodes agree on it: seconds more than a request on a
# busy cluster, and a migration is run by an operator, who can wait
_SCHEMA_CHANGE_S = 60.0
_SCHEMA_SPREAD_S = 30.0  # how long a step waits for another process's keyspace to reach it
_SCHEMA_SPREAD_RETRY_S = 0.5
_LEVELED = "{'class': 'LeveledCompactionStrategy'}"
_SIZE_TIERED = "{'class': 'SizeTieredCompactionStrategy'}"
_TEN_DAYS = 864_000  # Cassandra's default gc_grace_seconds

# Each table's compaction and gc_grace_seconds (docs/operations.md, "Compaction and gc_grace"):
# - Leveled where reads dominate or rows are overwritten or deleted: one Cassandra partition is
#   written by many replication batches over time (a segment of events, a journal's row, a
#   pointer, a bucket of ids), and leveled compaction keeps a read of it to about one SSTable
#   per level, and drops the rows a Delete or Purge shadowed sooner than size-tiered would.
# - Size-tiered for `appends`: written once, in offset order, never updated nor read at random,
#   so its partitions sit in few SSTables anyway and leveled's rewrites would buy nothing.
# - gc_grace stays ten days everywhere: a tombstone dropped before every replica has it (a
#   repair) would bring back what it deleted, an event a subscriber reading from the store
#   would be given, a purged journal in the listing, a removed snapshot; so a full repair must
#   run within it. Tables that are never deleted from (`journals`, `pointers2`) keep it too: it
#   also bounds how long a dead node's hints are kept.
TABLE_OPTIONS: dict[str, tuple[str, int]] = {
    "events": (_LEVELED, _TEN_DAYS),
    "event_records": (_LEVELED, _TEN_DAYS),
    "journals": (_LEVELED, _TEN_DAYS),
    "journal_ids": (_LEVELED, _TEN_DAYS),
    "pointers": (_LEVELED, _TEN_DAYS),
    "pointers2": (_LEVELED, _TEN_DAYS),
    "appends": (_SIZE_TIERED, _TEN_DAYS),
    "snapshots": (_LEVELED, _TEN_DAYS),
    "snapshot_chunks": (_LEVELED, _TEN_DAYS),
}


def _options(table: str) -> str:
    compaction, gc_grace = TABLE_OPTIONS[table]
    return f"compaction = {compaction} AND gc_grace_seconds = {gc_grace}"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a migration: what it does, and doing it."""

    says: str
    run: Callable[[], Awaitable[None]]


async def ensure_schema(session: Session, keyspace: str, replication: str) -> None:
    """Create the keyspace and tables if missing, or migrate them to this version; refuse a
    schema newer than this code's (`migrate` without a dry run)."""
    await migrate(session, keyspace, replication)


async def migrate(
    session: Session, keyspace: str, replication: str, dry_run: bool = False
) -> list[str]:
    """Bring the keyspace to `SCHEMA_VERSION` (creating it if missing): what each step did, or
    with `dry_run` would do. SchemaTooNew for a newer one.

    `replication` is the setting's (`topology.parse_replication`: "auto" decides by the data
    centres the session's cluster has). A keyspace that exists already keeps its
    replication: changing it is an operator's step (ALTER KEYSPACE, then a full repair:
    docs/operations.md), so a different one is only warned about, naming both.

    Online: every step is additive, so processes of the version before keep running through
    it (docs/operations.md, "Upgrading the schema"). From 2 to 3: `pointers2` is created and
    filled from `pointers`, each row stamped with its offset + 1 as replication stamps it, so
    a version 3 worker's newer pointer is never overwritten; the tables get their options;
    then the version is written. A version 2 worker still running writes only `pointers`:
    readers of version 3 then see that partition's pointer behind, never ahead, of what is
    stored, which costs them more of Kafka to read and nothing else (every read folds the
    log after the pointer onto the stored rows, and a replay is harmless), until it stops.

    From 3 to 4 (`event_records`, `journals.records_from`): additive and quick, but not
    online: every version 3 process is stopped first (the module docstring says why)."""
    steps = await _steps(session, keyspace, replication)
    if not dry_run:
        for step in steps:
            await step.run()
    return [step.says for step in steps]


async def _steps(session: Session, keyspace: str, replication: str) -> list[Step]:
    async def run(query: str) -> None:
        # on several nodes, a keyspace another process created just now may not have reached
        # this statement's coordinator yet ("Keyspace ... doesn't exist", seen in CI on the
        # three-node cluster as two workers started): every step is idempotent, so it waits
        # for the schema to spread and runs again, for a bounded time
        loop = asyncio.get_running_loop()
        give_up = loop.time() + _SCHEMA_SPREAD_S
        while True:
            try:
                await cql.execute(session, query, timeout_s=_SCHEMA_CHANGE_S)
                return
            except InvalidRequest as error:
                if "doesn't exist" not in str(error) or loop.time() > give_up:
                    raise
            await asyncio.sleep(_SCHEMA_SPREAD_RETRY_S)

    def step(says: str, query: str) -> Step:
        return Step(says, functools.partial(run, query))

    rows = await cql.execute(
        session,
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
        (keyspace,),
    )
    nodes = _nodes_per_dc(session.cluster)
    wanted = parse_replication(replication) or auto_replication(nodes)
    if not rows:
        create = f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {cql_map(wanted)}"
        steps = [step(f"create keyspace {keyspace}", create)]
        version = None
    else:
        has = dict(rows[0].replication)
        if replicas_per_dc(has, nodes) != replicas_per_dc(wanted, nodes):
            log.warning(
                "keyspace %s has the replicas %s per data centre, and the settings say %s "
                "(KJ_KEYSPACE_REPLICATION=%s): the keyspace's stay; ALTER KEYSPACE and a "
                "repair change them (docs/operations.md)",
                keyspace,
                replicas_per_dc(has, nodes),
                replicas_per_dc(wanted, nodes),
                replication,
            )
        steps = []
        version = await _existing_version(session, keyspace)
    # only the tables missing (at this version already: those added since without a bump,
    # `topic_grow` and `listing_buckets`); a complete keyspace costs one read at start and no
    # schema change
    present = await _tables_of(session, keyspace) if rows else set()
    for table in _TABLES:
        name = table.split(".", 1)[1].split(" ", 1)[0]
        if name in present:
            continue
        create = table.format(ks=keyspace)
        if name in TABLE_OPTIONS:  # a table it creates gets them at once: one schema change
            create += " WITH " + _options(name)
        steps.append(step(f"create table {name} if missing", create))
    columns = await _columns_of(session, keyspace, "journals")  # none: a table to create
    if columns and "base" not in columns:
        # version 4's, for a grown topic's moved journals (docs/growing.md): added to a
        # keyspace at version 4 made before it too; older code never reads or writes it, and
        # only this code's replication of a grown topic's successor writes it
        alter = f"ALTER TABLE {keyspace}.journals ADD base bigint"
        steps.append(step("table journals: add base", alter))
    if version == SCHEMA_VERSION:
        return steps
    if version == 1:  # version 1 had no journal_ids: list its journals once
        says = "list every journal in journal_ids (version 1 had none)"
        steps.append(Step(says, functools.partial(_fill_journal_ids, session, keyspace)))
    if version is not None and version < 3:  # version 2 kept pointers in `pointers` only
        says = "copy pointers into pointers2, each stamped with its offset + 1"
        steps.append(Step(says, functools.partial(_fill_pointers2, session, keyspace)))
    if version is not None and version < 3:  # tables made before it have Cassandra's defaults
        for name in TABLE_OPTIONS:
            alter = f"ALTER TABLE {keyspace}.{name} WITH {_options(name)}"
            steps.append(step(f"table {name}: {_options(name)}", alter))
    if columns and "records_from" not in columns:  # before version 4 (a rerun finds it: an
        # ALTER ... ADD of a column that exists fails)
        alter = f"ALTER TABLE {keyspace}.journals ADD records_from bigint"
        steps.append(step("table journals: add records_from", alter))
    insert = (
        f"INSERT INTO {keyspace}.schema_version (name, version) "
        f"VALUES ('journal', {SCHEMA_VERSION})"
    )
    steps.append(step(f"schema version {version} -> {SCHEMA_VERSION}", insert))
    return steps


async def _tables_of(session: Session, keyspace: str) -> set[str]:
    rows = await cql.execute(
        session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (keyspace,),
    )
    return {row.table_name for row in rows}


async def _columns_of(session: Session, keyspace: str, table: str) -> set[str]:
    rows = await cql.execute(
        session,
        "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
        "AND table_name = %s",
        (keyspace, table),
    )
    return {row.column_name for row in rows}


async def _existing_version(session: Session, keyspace: str) -> int | None:
    """The version of an existing keyspace (None: no version table yet)."""
    tables = await cql.execute(
        session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s "
        "AND table_name = 'schema_version'",
        (keyspace,),
    )
    return await _version(session, keyspace) if tables else None


async def check_schema(session: Session, keyspace: str) -> None:
    """Refuse a keyspace without this schema (an administrator creates it: `ensure_schema`
    with a role that may) or with a newer one."""
    try:
        version = await _version(session, keyspace)
    except StoreUnavailable as error:
        # cql maps "no such keyspace or table" (an InvalidRequest) to StoreUnavailable, as for
        # a store that loses them while running; at connect it is a missing schema
        if not isinstance(error.__cause__, InvalidRequest):
            raise
        raise SchemaMissing(f"keyspace {keyspace}: {error.__cause__}") from error
    if version == SCHEMA_VERSION and "base" not in await _columns_of(session, keyspace, "journals"):
        raise SchemaMissing(
            f"keyspace {keyspace} is at version {SCHEMA_VERSION} without journals.base (a build "
            "before it made it): an administrator adds it: kafka-journal schema migrate"
        )
    if version is None or version < SCHEMA_VERSION:
        raise SchemaMissing(
            f"keyspace {keyspace} has no journal schema of version {SCHEMA_VERSION} (it has "
            f"{version}); an administrator creates or upgrades it: kafka-journal schema migrate "
            "(kafka-journal stack up does for the local stack)"
        )


async def _version(session: Session, keyspace: str) -> int | None:
    """The schema's version (None: none written yet); SchemaTooNew past this code's."""
    rows = await cql.execute(
        session, f"SELECT version FROM {keyspace}.schema_version WHERE name = 'journal'"
    )
    if rows and rows[0].version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"keyspace {keyspace} has schema version {rows[0].version}; "
            f"this code knows up to {SCHEMA_VERSION}"
        )
    return rows[0].version if rows else None


def _nodes_per_dc(cluster: Cluster) -> dict[str, int]:
    """The nodes the driver knows, by data centre (up or not)."""
    counts: dict[str, int] = {}
    for host in cluster.metadata.all_hosts():
        dc = host.datacenter or "?"
        counts[dc] = counts.get(dc, 0) + 1
    return counts


async def record_partitions(
    session: Session, keyspace: str, topic: str, partitions: int
) -> int | None:
    """The partition count recorded for `topic`, recording `partitions` first if none is (the
    first process to record wins); None when the keyspace has no `topic_partitions` table (one
    an administrator created before this version, and has not upgraded since)."""
    try:
        rows = await cql.execute(
            session,
            f"INSERT INTO {keyspace}.topic_partitions (topic, partitions, recorded_at) "
            "VALUES (%s, %s, toTimestamp(now())) IF NOT EXISTS",
            (topic, partitions),
        )
    except StoreUnavailable as error:
        if not isinstance(error.__cause__, InvalidRequest):  # the table is missing
            raise
        return None
    recorded: int = rows[0].partitions if rows and not rows[0].applied else partitions
    return recorded


def id_bucket(journal_id: str) -> int:
    """The `journal_ids` bucket of an id in a topic of 32 buckets (never grown)."""
    return listing_bucket(journal_id, BUCKETS)


async def _fill_pointers2(session: Session, keyspace: str) -> None:
    """Copy `pointers` into `pointers2`, stamped as replication stamps a pointer, so a later
    pointer written meanwhile (by a version 3 worker) wins."""
    insert = (
        f"INSERT INTO {keyspace}.pointers2 (topic, partition, offset) VALUES (%s, %s, %s) "
        "USING TIMESTAMP %s"
    )
    rows = cql.stream(session, f"SELECT topic, partition, offset FROM {keyspace}.pointers")
    async for row in rows:
        await cql.execute(session, insert, (row.topic, row.partition, row.offset, row.offset + 1))


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
