"""The tables-alone scale scenario's entries (its measurements run in `kafka-journal bench
--scale-tables-only`): what it writes into the changelog is what a worker's tables hold for
the same journals, each of one Append."""

from __future__ import annotations

import msgspec

from bench.scale_tables import append_entries
from journal.core.model import JournalKey
from journal.kafka import partition_of
from tables.tables import JournalTables
from tables.values import decode_runs, encode_runs
from tests.support import actions as a


def test_each_journal_has_one_entry_in_its_partition_as_the_worker_tables_write_it() -> None:
    journals, partitions = 300, 4
    chunks = list(append_entries(journals, partitions, chunk=70))
    assert len(chunks) == 5  # 70, 70, 70, 70, 20
    written = {
        key: (partition, value)
        for chunk in chunks
        for partition, entries in chunk.items()
        for key, value in entries
    }
    assert sorted(written) == sorted(f"j-{n}".encode() for n in range(journals))  # once each

    # the same journals' one-event Appends, in id order, each at its partition's next offset
    # (bench/restore.py's fill_first_appends), through the worker's tables
    tables, next_offset = JournalTables({}, {}), [0] * partitions
    for n in range(journals):
        journal_id = f"j-{n}"
        partition = partition_of(journal_id, partitions)
        record = msgspec.structs.replace(
            a.append(JournalKey("t", journal_id), next_offset[partition], 1, 1),
            partition=partition,
        )
        tables.record(record, -1)
        next_offset[partition] += 1
    for key, (partition, value) in written.items():
        runs, _ = tables.runs(key.decode(), partition)
        assert partition == partition_of(key.decode(), partitions)
        assert decode_runs(value) == runs
        assert value == encode_runs(runs)
    assert all(next_offset)  # every partition had journals
