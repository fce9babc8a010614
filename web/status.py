"""`GET /status`: what a worker knows of itself, as JSON, read from its own metrics.

The same numbers `/metrics` exposes (replication lag by owned partition, quarantined records,
requests by status), summed for a person or the console rather than for Prometheus: a worker
has a lag series only for the partitions it owns (`journal.metrics.forget_replication_lag`),
so those are its partitions. Rates are left to the reader, from two readings. The group's
workers and their partitions are the backend's to say (`JournalBackend.workers`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from journal.metrics import NAMESPACE, Metrics
from journal.version import VERSION
from web.schema import GroupWorkerOut, PartitionStatusOut, WorkerStatusOut

_N = NAMESPACE + "_"
_LAG_RECORDS = _N + "replication_lag_records"
_LAG_SECONDS = _N + "replication_lag_seconds"
_QUARANTINED = _N + "quarantined_records_total"
_REQUESTS = _N + "http_requests_total"
_SUBSCRIPTIONS_OPEN = _N + "http_subscriptions_open"


def worker_status(metrics: Metrics, workers: Mapping[str, Sequence[int]]) -> WorkerStatusOut:
    lag: defaultdict[int, dict[str, float]] = defaultdict(dict)
    quarantined = requests = client_errors = server_errors = subscriptions = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            match sample.name:
                case name if name in (_LAG_RECORDS, _LAG_SECONDS):
                    lag[int(sample.labels["partition"])][name] = sample.value
                case name if name == _QUARANTINED:
                    quarantined += sample.value
                case name if name == _REQUESTS:
                    requests += sample.value
                    status = sample.labels["status"]
                    if status.startswith("4"):
                        client_errors += sample.value
                    elif status.startswith("5") or status == "aborted":
                        server_errors += sample.value
                case name if name == _SUBSCRIPTIONS_OPEN:
                    subscriptions = sample.value
    return WorkerStatusOut(
        version=VERSION,
        partitions=[
            PartitionStatusOut(
                partition=partition,
                lagRecords=int(values.get(_LAG_RECORDS, 0)),
                lagSeconds=values.get(_LAG_SECONDS, 0.0),
            )
            for partition, values in sorted(lag.items())
        ],
        workers=[
            GroupWorkerOut(url=url, partitions=list(partitions))
            for url, partitions in workers.items()
        ],
        quarantinedRecords=int(quarantined),
        requests=int(requests),
        clientErrors=int(client_errors),
        serverErrors=int(server_errors),
        subscriptionsOpen=int(subscriptions),
    )
