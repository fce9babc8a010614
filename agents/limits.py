"""The agents' bounds' defaults, apart so that the settings (app/settings.py) name them without
importing Faust."""

from __future__ import annotations

from journal.replication import CACHED_JOURNALS

DEFAULT_CATCH_UP_CONCURRENCY = 4  # partitions catching up from Kafka at once, per worker
# per owned partition, what replication holds in memory (issue 43: both grow with the partitions
# a worker owns, not with the journals): the journals' rows it wrote lately (~280 B each,
# `StoredRows`: folding a batch onto them needs no read of the store), and the actions the agent
# handled that are not written yet (~1.2 KB each with their events; past it the partition's
# queue is dropped and replayed from Kafka). A worker of 32 partitions: ~86 MiB and up to ~370 MiB
DEFAULT_CACHED_ROWS = CACHED_JOURNALS  # 10,000, as every replicating process keeps
DEFAULT_QUEUED_RECORDS = 10_000
