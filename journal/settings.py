"""Where the journal's servers are and how its topic and keyspace look.

Values come from `KJ_*` environment variables with local defaults; command-line flags override
them (see `app/cli.py`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from journal.store.cassandra import CassandraConfig
from journal.topic import TopicSpec

DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class Settings:
    kafka_bootstrap: str = "127.0.0.1:9092"
    cassandra_hosts: str = "127.0.0.1"  # comma-separated
    cassandra_port: int = 9042
    topic: str = "journal"
    keyspace: str = "journal"
    # the action topic, when this process creates it; production: RF 3, min ISR 2, >= 24 h
    partitions: int = 8
    replication_factor: int = 1
    min_insync_replicas: int = 1
    retention_ms: int = 7 * DAY_MS
    keyspace_replication: str = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    segment_size: int = 100_000
    max_record_bytes: int = 1_000_000
    # how a read learns where "now" is: "high_watermark" (writes nothing) or "mark"
    read_fence: str = "high_watermark"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Defaults, then `KJ_<FIELD>` variables (e.g. KJ_KAFKA_BOOTSTRAP), then `overrides`."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for spec in fields(cls):
            raw = env.get(f"KJ_{spec.name.upper()}")
            if raw is not None:
                values[spec.name] = int(raw) if spec.type in ("int", int) else raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]

    @property
    def cassandra_host_list(self) -> tuple[str, ...]:
        return tuple(h.strip() for h in self.cassandra_hosts.split(",") if h.strip())

    def cassandra_config(self) -> CassandraConfig:
        return CassandraConfig(
            hosts=self.cassandra_host_list,
            port=self.cassandra_port,
            keyspace=self.keyspace,
            replication=self.keyspace_replication,
            segment_size=self.segment_size,
        )

    def topic_spec(self) -> TopicSpec:
        return TopicSpec(
            self.topic,
            self.partitions,
            self.replication_factor,
            self.min_insync_replicas,
            self.retention_ms,
        )
