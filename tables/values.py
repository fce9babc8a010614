"""The values of the worker's two tables, one of each per journal: small, bounded, pure.

Both hold `OffsetRuns` (journal/core/index.py): where the journal's actions sit in Kafka, never
their content:
- `appends` (table `append-offsets`): the offsets of the journal's Appends;
- `deletions` (table `deletion-offsets`): the offsets of its Deletes and Purges.
Replicated runs are kept, not pruned: bounded (at most `MAX_RUNS` runs, merged), they let a read
without the store fetch the whole journal (its own records) for as long as Kafka keeps them.
(Values written before, pruned at the replicated pointer, keep their `pruned_to`.) The reading
flow fetches what both list and folds it onto the store's state (journal/core/fold.py): the
tables never interpret an action beyond its kind, so they cannot disagree with the fold.
"""

from __future__ import annotations

import orjson

from journal.core import OffsetRuns


def encode_runs(runs: OffsetRuns) -> bytes:
    return orjson.dumps(runs.encode())


def decode_runs(raw: bytes | None) -> OffsetRuns:
    return OffsetRuns() if not raw else OffsetRuns.decode(orjson.loads(raw))
