"""Replication and reads on a three-node Cassandra against one node, in one run (issue 41).

Both stores share one Kafka: the one-node Cassandra is the environment's stack, the three-node
one its twin (`StackSettings.cassandra_cluster_twin`, ports + 200), started for the run. Each
side has its own topic and keyspace, created by the store as a new user's would be (`auto`:
NetworkTopologyStrategy at min(3, nodes), LOCAL_QUORUM reads and writes).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from bench.common import Row, Section, percentile, timed, unique
from bench.environment import connected, quiet_cassandra, settings_for
from bench.replication import write_backlog
from bench.workload import events
from journal import Ack, Journals
from journal.errors import StoreUnavailable
from journal.replication import AlreadyQuarantined, replicate_to_now
from journal.settings import Settings
from journal.store import CassandraStore, execute
from stack import StackSettings

METHOD = (
    "One Kafka, two Cassandras started side by side on the same machine: the one-node dev "
    "Cassandra and a three-node one (127.0.0.1-3, small heaps), each keyspace created by the "
    "store with its defaults (NetworkTopologyStrategy, RF = min(3, nodes): RF 1 on one node, "
    "RF 3 on three; LOCAL_QUORUM reads and writes: 1 of 1, 2 of 3). Replication: {events:,} "
    "events in appends of 10 over 100 journals on a fresh 3-partition topic per side, all "
    "written first, then replicated in-process by the core's `replicate_to_now` into that "
    "side's keyspace, timed once per side (one node first), both Cassandras' compactions and "
    "flushes let finish before each; a replication the store times out is run again from its "
    "pointers (at most {attempts} attempts), the time counted. Reads from the store (its "
    "`meta` then `read`, the two requests a read makes of Cassandra): {short} journals of 100 "
    "events (10 appends of 10) and one of {recovery:,} (appends of 100), replicated, then "
    "{reps} short reads and {recovery_reps} recoveries per side after {warm} warm-up reads, "
    "the sides alternating read by read; p50 and p99 in ms."
)


_ATTEMPTS = 5  # of a replication that Cassandra times out, before the scenario gives up


@dataclass(frozen=True, slots=True)
class CassandraClusterSizes:
    events: int = 20_000  # the replicated backlog, per side
    short_journals: int = 10  # journals of 100 events, read in turn
    short_reads: int = 200
    recovery_events: int = 2000
    recovery_reads: int = 20
    warmup: int = 3


def side_settings(base: Settings, label: str, cassandra: StackSettings) -> Settings:
    """`base` (its Kafka) with a fresh topic and keyspace on `cassandra`'s nodes."""
    return settings_for(base, label, partitions=3).replace(
        cassandra_hosts=",".join(cassandra.cassandra_hosts),
        cassandra_port=cassandra.cassandra_port,
    )


@dataclass
class _Side:
    label: str
    settings: Settings
    journals: Journals
    store: CassandraStore
    short: list[str] = field(default_factory=list)  # journals of 100 events
    recovery: str = ""  # the long journal


async def bench_cassandra_cluster(
    base: Settings,
    cassandras: dict[str, StackSettings],
    sizes: CassandraClusterSizes = CassandraClusterSizes(),
) -> Section:
    """`cassandras`: "1 node" and "3 nodes", the first the baseline of the ratios."""
    section = Section(
        "Cassandra: three nodes against one",
        METHOD.format(
            events=sizes.events,
            short=sizes.short_journals,
            recovery=sizes.recovery_events,
            reps=sizes.short_reads,
            recovery_reps=sizes.recovery_reads,
            warm=sizes.warmup,
            attempts=_ATTEMPTS,
        ),
    )
    rates: dict[str, float] = {}
    failures: dict[str, int] = {}
    short: dict[str, list[float]] = {}
    recovery: dict[str, list[float]] = {}
    sides: dict[str, _Side] = {}
    async with AsyncExitStack() as opened:
        for label, cassandra in cassandras.items():
            settings = side_settings(base, f"c{len(cassandra.cassandra_hosts)}", cassandra)
            journals, store = await opened.enter_async_context(connected(settings))
            sides[label] = _Side(label, settings, journals, store)
            replicas = await _replicas(store, settings.keyspace)
            section.notes.append(f"{label}: the keyspace's replicas {replicas}")
        for side in sides.values():
            await write_backlog(side.journals, sizes.events)
        for label, side in sides.items():
            # the other side's compactions would run on the cores this one measures on
            for other in sides.values():
                await quiet_cassandra(other.store)
            seconds, failures[label] = await _replicate(side)
            rates[label] = sizes.events / seconds
        for side in sides.values():
            await _write_reads(side, sizes)
            await _replicate(side)  # untimed
        for side in sides.values():
            await quiet_cassandra(side.store)
        short = await _alternating(
            sides,
            sizes.short_reads,
            sizes.warmup,
            lambda side, n: (side.short[n % len(side.short)], 100),
        )
        recovery = await _alternating(
            sides,
            sizes.recovery_reads,
            sizes.warmup,
            lambda side, n: (side.recovery, sizes.recovery_events),
        )
    one, three = list(cassandras)
    for label in cassandras:
        section.add(
            Row(
                f"replication of {sizes.events:,}, {label}",
                rates[label],
                "events/s",
                baseline=None if label == one else rates[one],
                note=f"once; {failures[label]} attempts failed on Cassandra timeouts"
                if failures[label]
                else "once",
            )
        )
    for name, samples in (
        ("read of 100 events", short),
        (f"recovery of {sizes.recovery_events:,} events", recovery),
    ):
        for q in (50, 99):
            base_value = percentile(samples[one], q)
            section.add(Row(f"{name}, {one}: p{q}", base_value, "ms"))
            section.add(
                Row(
                    f"{name}, {three}: p{q}",
                    percentile(samples[three], q),
                    "ms",
                    baseline=base_value,
                    note=f"{len(samples[three])} reads",
                )
            )
        for label in cassandras:
            section.samples[f"{name}, {label}"] = samples[label]
    return section


async def _replicas(store: CassandraStore, keyspace: str) -> str:
    """The keyspace's replicas per data centre, as Cassandra has them ("datacenter1: 3")."""
    rows = await execute(
        store.keyspace_access.session,
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
        (keyspace,),
    )
    replication = dict(rows[0].replication)
    return ", ".join(f"{dc}: {n}" for dc, n in sorted(replication.items()) if dc != "class")


async def _replicate(side: _Side) -> tuple[float, int]:
    """Seconds `replicate_to_now` takes to replicate what the side's topic holds, and the
    attempts that failed on the way: a store that times out (as three nodes on a loaded host
    did) is tried again from its pointers, as a worker would, the time counted."""
    started = time.perf_counter()
    for failed in range(_ATTEMPTS):
        try:
            await replicate_to_now(
                side.settings.kafka_access(), side.store, side.settings.topic, AlreadyQuarantined()
            )
        except StoreUnavailable:
            if failed == _ATTEMPTS - 1:
                raise
            continue
        return time.perf_counter() - started, failed
    raise AssertionError("unreachable")


async def _write_reads(side: _Side, sizes: CassandraClusterSizes) -> None:
    prefix = unique("read")
    side.short = [f"{prefix}-{n}" for n in range(sizes.short_journals)]
    for journal_id in side.short:
        for first in range(1, 101, 10):
            await side.journals.journal(journal_id).append(events(first, 10), ack=Ack.KAFKA)
    side.recovery = unique("recovery")
    journal = side.journals.journal(side.recovery)
    for first in range(1, sizes.recovery_events + 1, 100):
        count = min(100, sizes.recovery_events - first + 1)
        await journal.append(events(first, count), ack=Ack.KAFKA)


def _store_read(side: _Side, journal_id: str, expected: int) -> Callable[[], Awaitable[None]]:
    """The store's share of a read: the journal's row, then its events."""
    key = side.journals.journal(journal_id).key

    async def read() -> None:
        meta = await side.store.meta(key)
        assert meta is not None, f"{side.label}: {journal_id} not replicated"
        count = 0
        async for _record in side.store.read(key, meta):
            count += 1
        assert count == expected, f"{side.label}: read {count} of {expected}"

    return read


async def _alternating(
    sides: dict[str, _Side],
    reads: int,
    warmup: int,
    pick: Callable[[_Side, int], tuple[str, int]],
) -> dict[str, list[float]]:
    """Milliseconds of each read of the journal `pick` names (with its events' count), the
    sides alternating read by read (their order swapped every round) so that a load on the
    shared machine falls on both."""
    samples: dict[str, list[float]] = {label: [] for label in sides}
    order = list(sides.values())
    for n in range(warmup + reads):
        for side in order if n % 2 == 0 else reversed(order):
            took = await timed(_store_read(side, *pick(side, n)))
            if n >= warmup:
                samples[side.label].append(took)
    return samples
