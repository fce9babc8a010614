"""What a deployment stores per event and per journal, on Kafka's disk and Cassandra's (issue 43,
docs/capacity.md): the per-unit costs a sizing projects from.

Two workloads on fresh topics and keyspaces of one partition each, so the two costs separate:
one long journal (the bytes an event costs) and many journals of one event each (the bytes a
journal costs besides its event). Kafka's bytes are its log segments' on disk; Cassandra's are
the keyspace's SSTables after its memtables are flushed (a table's `memtable_flush_period_in_ms`:
CQL has no flush command and the stack opens no JMX) and compaction is done, per table.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from bench.common import Row, Section
from bench.environment import connected, quiet_cassandra, replicate_here, settings_for
from journal import Ack, Event, Journals, JsonPayload
from journal.settings import Settings
from journal.store import CassandraStore, execute

METHOD = (
    "Two workloads, each on a fresh topic (1 partition) and keyspace: one journal of {events:,} "
    "events appended 10 at a time (JSON events of ~300 bytes, 260 of them random URL-safe text, "
    "so compression finds little: a worst case), and {journals:,} "
    "journals of one such event each, appended at c=64 (answered at Kafka's acknowledgement). "
    "Each is replicated to the store "
    "(`replicate_to_now`); then Cassandra's memtables are flushed (the tables' "
    "`memtable_flush_period_in_ms`) and its compactions waited out, and the bytes of the "
    "topic's log segments and of the keyspace's SSTables (every component: data, index, "
    "filter, statistics) are summed on disk: one copy (the mean over the brokers or nodes "
    "holding one), so a deployment multiplies by its replication factors. The tables of a "
    "keyspace or topic (pointers, schema version, partition count) are left out."
)
_FLUSH_MS = 1000
# tables of a keyspace or topic, not of journals or events: their few hundred bytes are no unit's
_FIXED = frozenset({"pointers", "pointers2", "schema_version", "topic_partitions"})


def events(first: int, count: int) -> list[Event]:
    """Events of ~300 bytes whose padding is random text: the workload's own padding (one
    letter repeated) compresses to nothing, and a footprint of it would flatter every store."""
    return [
        Event(
            n,
            frozenset({"bench"}),
            JsonPayload.of({"n": n, "kind": "bench", "pad": secrets.token_urlsafe(195)}),
        )
        for n in range(first, first + count)
    ]


_SETTLE_POLLS = 3  # equal readings in a row, 1 s apart, before the sizes are taken


@dataclass(frozen=True, slots=True)
class FootprintSizes:
    events: int = 20_000  # of the long journal
    journals: int = 5_000  # of one event each


def kafka_bytes(stack_dir: Path, topic: str) -> int:
    """One copy of a one-partition topic's log segments: the mean over the brokers holding it."""
    copies = []
    for directory, _, files in os.walk(stack_dir):
        if Path(directory).name == f"{topic}-0":
            logs = (Path(directory) / f for f in files if f.endswith(".log"))
            copies.append(sum(log.stat().st_size for log in logs))
    return sum(copies) // max(1, len(copies))


def cassandra_tables(stack_dir: Path, keyspace: str) -> dict[str, int]:
    """One copy of each of the keyspace's tables (its SSTables' components): the mean over the
    nodes holding the keyspace."""
    sizes: dict[str, int] = {}
    nodes: set[Path] = set()
    for directory, _, files in os.walk(stack_dir):
        path = Path(directory)
        if path.parent.name == keyspace and "-" in path.name:
            nodes.add(path.parent)
            table = path.name.rsplit("-", 1)[0]
            size = sum((path / f).stat().st_size for f in files if f.endswith(".db"))
            sizes[table] = sizes.get(table, 0) + size
    copies = max(1, len(nodes))
    return {t: size // copies for t, size in sizes.items() if t not in _FIXED}


async def flushed(store: CassandraStore, stack_dir: Path, keyspace: str) -> dict[str, int]:
    """The keyspace's table sizes once its memtables are on disk and compaction is done."""
    session = store.keyspace_access.session
    tables = await execute(
        session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (keyspace,),
    )
    for row in tables:
        await execute(
            session,
            f"ALTER TABLE {keyspace}.{row.table_name} "
            f"WITH memtable_flush_period_in_ms = {_FLUSH_MS}",
        )
    readings: list[dict[str, int]] = []
    for _ in range(120):  # a bound: two minutes
        await asyncio.sleep(1)  # the flush period's pace, not a stand-in: readings are compared
        await quiet_cassandra(store)
        readings.append(cassandra_tables(stack_dir, keyspace))
        last = readings[-_SETTLE_POLLS:]
        if len(last) == _SETTLE_POLLS and all(r == last[0] for r in last) and last[0]:
            return last[0]
    raise RuntimeError(f"{keyspace}'s SSTables did not settle in two minutes")


async def _write_long(journals: Journals, count: int) -> None:
    journal = journals.journal("footprint-long")
    for first in range(1, count + 1, 10):
        await journal.append(events(first, min(10, count - first + 1)), ack=Ack.KAFKA)


async def _write_many(journals: Journals, count: int) -> None:
    lanes = asyncio.Semaphore(64)

    async def one(n: int) -> None:
        async with lanes:
            await journals.journal(f"footprint-{n:09d}").append(events(1, 1), ack=Ack.KAFKA)

    await asyncio.gather(*(one(n) for n in range(count)))


async def bench_footprint(base: Settings, stack_dir: Path, sizes: FootprintSizes) -> Section:
    long = settings_for(base, "footprint_long", partitions=1)
    many = settings_for(base, "footprint_many", partitions=1)
    section = Section(
        "Footprint",
        METHOD.format(
            events=sizes.events,
            journals=sizes.journals,
        ),
    )
    measured: dict[str, tuple[int, dict[str, int]]] = {}
    for settings, name in ((long, "long"), (many, "many")):
        async with connected(settings) as (journals, store):
            if name == "long":
                await _write_long(journals, sizes.events)
            else:
                await _write_many(journals, sizes.journals)
            await replicate_here(settings, store)
            tables = await flushed(store, stack_dir, settings.keyspace)
            measured[name] = (kafka_bytes(stack_dir, settings.topic), tables)

    long_kafka, long_tables = measured["long"]
    many_kafka, many_tables = measured["many"]
    per_event = sum(long_tables.values()) / sizes.events
    section.add(Row("Kafka: an append of 10 events, per event", long_kafka / sizes.events, "B"))
    section.add(Row("Kafka: an append of 1 event", many_kafka / sizes.journals, "B"))
    section.add(Row("Cassandra: an event (appends of 10), all tables", per_event, "B"))
    for table, size in sorted(long_tables.items()):
        if size:
            section.add(Row(f"  of which {table}", size / sizes.events, "B"))
    per_journal = sum(many_tables.values()) / sizes.journals
    section.add(Row("Cassandra: a journal of 1 event, all tables", per_journal, "B"))
    for table, size in sorted(many_tables.items()):
        if size:
            section.add(Row(f"  of which {table}", size / sizes.journals, "B"))
    return section
