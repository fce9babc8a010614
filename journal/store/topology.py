"""How the store uses a Cassandra cluster: the keyspace's replicas per data centre and the
consistency of reads and writes, with their defaults (the `KJ_*` settings take them from here).
No driver import: the settings parse and check these without loading cassandra-driver.

What the defaults keep (docs/operations.md, "Cassandra in production", says more):
- replicas: a keyspace this process creates gets NetworkTopologyStrategy with, in every data
  centre the cluster has, min(`AUTO_REPLICAS`, its nodes) replicas, as the action topic gets
  min(3, brokers): 3 in production, 1 on the one-node development stack;
- reads and writes LOCAL_QUORUM: 2 of 3 replicas of the local data centre, so one node down
  stops neither, and a read's quorum meets every acknowledged write's (2 + 2 > 3), which the
  order of replication's writes needs (events, then the journal's row, then the pointer: a
  reader that sees one sees what it covers).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Literal

AUTO_REPLICAS = 3  # per data centre, for a keyspace created with the automatic replication
NTS = "NetworkTopologyStrategy"
SIMPLE = "SimpleStrategy"

ReadConsistency = Literal["LOCAL_ONE", "ONE", "LOCAL_QUORUM", "QUORUM", "ALL"]
# ANY is left out: a write acknowledged by a hint alone is not readable
WriteConsistency = Literal["LOCAL_ONE", "ONE", "LOCAL_QUORUM", "QUORUM", "EACH_QUORUM", "ALL"]
DEFAULT_READ_CONSISTENCY: ReadConsistency = "LOCAL_QUORUM"
DEFAULT_WRITE_CONSISTENCY: WriteConsistency = "LOCAL_QUORUM"
# above the server's own timeouts (writes 2 s, reads 5 s), so the server answers first with
# what happened (a WriteTimeout, Unavailable) and the retry policy can act on it
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# after a read found the store unavailable, reads fail at once for this long, then one asks
# again (journal/store/connecting.py)
DEFAULT_DOWN_RETRY_S = 1.0
DEFAULT_RETRIES = 2  # of an idempotent request, at the next host, on a timeout or a lost node
# a second execution of an idempotent request at the next host when the first has no answer
# after this long: far above a healthy answer (~1-10 ms), so only a slow or dead node causes it
DEFAULT_SPECULATIVE_AFTER_MS = 500
# what the store holds and how it writes, written once for the settings and the store's config
DEFAULT_SEGMENT_SIZE = 100_000  # events per segment of a new journal
DEFAULT_REPLICATION_WINDOW = 64  # requests of one replication batch in flight
DEFAULT_MAX_SNAPSHOT_BYTES = 16 * 2**20  # a snapshot's payload, stored in chunks
# seconds an `appends` row lives (0: while its Append has an event stored; docs/operations.md)
DEFAULT_APPENDS_TTL_S = 0
# how much longer than its topic's retention an `appends` row with a TTL must live, to outlive
# its record: Kafka deletes a segment once its newest record is past the retention and rolls a
# segment after 7 days (log.roll.hours' default), plus a day for retention checks and clocks
APPENDS_TTL_MARGIN_S = 8 * 24 * 60 * 60
# seconds a process uses what it read of a topic's listing generations before reading them
# again: `schema grow-listing` waits 3 of them per phase (docs/operations.md)
DEFAULT_LISTING_LEASE_S = 60.0

_DC_FACTOR = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*([1-9][0-9]*)\s*$")


def parse_replication(text: str) -> dict[str, str]:
    """The replication a setting says, as Cassandra's map: "auto" is `{}` (decided at
    creation, `auto_replication`), "dc1:3,dc2:3" NetworkTopologyStrategy with those replicas,
    or a CQL map as CREATE KEYSPACE takes it ("{'class': 'SimpleStrategy',
    'replication_factor': 1}"). ValueError for anything else."""
    stripped = text.strip()
    if stripped.lower() == "auto":
        return {}
    if stripped.startswith("{"):
        try:
            value = ast.literal_eval(stripped)
        except (ValueError, SyntaxError) as error:
            raise ValueError(f"not a CQL replication map: {text!r}") from error
        if not isinstance(value, dict) or not isinstance(value.get("class"), str):
            raise ValueError(f"a replication map needs a 'class': {text!r}")
        return {str(key): str(item) for key, item in value.items()}
    factors: dict[str, str] = {"class": NTS}
    for part in stripped.split(","):
        match = _DC_FACTOR.match(part)
        if match is None:
            raise ValueError(
                f"replication {text!r}: say auto, DC:REPLICAS[,DC:REPLICAS] (datacenter1:3), "
                "or a CQL map"
            )
        factors[match[1]] = match[2]
    return factors


def auto_replication(nodes_per_dc: Mapping[str, int]) -> dict[str, str]:
    """NetworkTopologyStrategy, each data centre at min(`AUTO_REPLICAS`, its nodes)."""
    return {"class": NTS} | {
        dc: str(min(AUTO_REPLICAS, nodes)) for dc, nodes in sorted(nodes_per_dc.items())
    }


def cql_map(replication: Mapping[str, str]) -> str:
    """The map as CREATE KEYSPACE ... WITH replication = takes it."""
    return "{" + ", ".join(f"'{key}': '{value}'" for key, value in replication.items()) + "}"


def replicas_per_dc(
    replication: Mapping[str, str], nodes_per_dc: Mapping[str, int]
) -> dict[str, int]:
    """What a replication map means on a cluster: replicas in each data centre (a
    SimpleStrategy's are not placed by data centre: with one data centre, all of them there)."""
    strategy = replication.get("class", "").rpartition(".")[2]
    if strategy == SIMPLE:
        factor = int(replication.get("replication_factor", "0"))
        if len(nodes_per_dc) <= 1:
            return {dc: factor for dc in nodes_per_dc}
        return {"(SimpleStrategy, across data centres)": factor}
    factors = {
        key: int(value)
        for key, value in replication.items()
        if key not in ("class", "replication_factor") and value.isdigit()
    }
    every = replication.get("replication_factor")
    if every is not None and every.isdigit():  # NetworkTopologyStrategy's: each data centre
        factors = {dc: int(every) for dc in nodes_per_dc} | factors
    return factors
