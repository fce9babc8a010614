"""The listing-at-scale scenario's arithmetic (its measurements run in `kafka-journal bench
--listing-only`): the ids it writes, their batches, the SSTable data length it reads, the
projection to 10^9 journals."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from bench.listing import (
    CYCLE,
    PREFIXES,
    Measured,
    Partitions,
    bucket_batches,
    data_bytes,
    journal_ids,
    power_of_two_above,
    prefix_count,
    prefix_of,
    section_of,
    uncompressed_length,
)
from journal.store import id_bucket


def test_ids_are_a_prefix_and_a_uuid_in_the_prefixes_shares() -> None:
    ids = list(journal_ids(CYCLE, seed=1))
    assert ids == list(journal_ids(CYCLE, seed=1))  # the same for a seed
    assert len(set(ids)) == CYCLE
    counts = Counter(next(p for p, _ in PREFIXES if i.startswith(p)) for i in ids)
    assert counts == dict(PREFIXES)
    assert all(len(i.split("-", 1)[1]) == 36 for i in ids)  # a UUID's text
    assert prefix_of(CYCLE - 1) == "refund-"
    for prefix, _ in PREFIXES:
        for count in (0, 1, CYCLE - 1, 3 * CYCLE + 7000):
            assert prefix_count(count, prefix) == sum(
                1 for n in range(count) if prefix_of(n) == prefix
            )


def test_a_batch_is_one_bucket_and_every_id_is_in_one() -> None:
    ids = list(journal_ids(2000, seed=2))
    batches = list(bucket_batches(iter(ids), 10))
    assert all(len(group) <= 10 for _, group in batches)
    assert all(id_bucket(i) == bucket for bucket, group in batches for i in group)
    assert sorted(i for _, group in batches for i in group) == sorted(ids)


def _compression_info(length: int, chunk: int, max_compressed: bool, extra: int = 0) -> bytes:
    name, key, value = b"LZ4Compressor", b"lz4_high_compressor_level", b"9"
    chunks = -(-length // chunk) + extra
    header = struct.pack(">H", len(name)) + name + struct.pack(">i", 1)
    header += struct.pack(">H", len(key)) + key + struct.pack(">H", len(value)) + value
    header += struct.pack(">i", chunk) + (struct.pack(">i", chunk) if max_compressed else b"")
    header += struct.pack(">qi", length, chunks)
    return header + b"".join(struct.pack(">q", n * 1000) for n in range(chunks))


def test_the_uncompressed_length_is_read_in_either_layout_and_summed_per_table(
    tmp_path: Path,
) -> None:
    for max_compressed in (True, False):
        info = _compression_info(1_000_000, 16384, max_compressed)
        assert uncompressed_length(info) == 1_000_000
    # a compaction's SSTable of Cassandra 5.0.9 had one chunk more than its length needs
    assert uncompressed_length(_compression_info(242_701_380, 16384, True, extra=1)) == 242_701_380
    with pytest.raises(ValueError, match="layout"):
        uncompressed_length(_compression_info(1_000_000, 16384, True, extra=2))
    with pytest.raises(ValueError, match="layout"):
        uncompressed_length(_compression_info(1_000_000, 16384, True)[:-8])  # one offset short
    table = tmp_path / "n1" / "data" / "ks" / "journal_ids-0a1b"
    table.mkdir(parents=True)
    (table / "nb-1-big-CompressionInfo.db").write_bytes(_compression_info(300, 64, True))
    (table / "nb-2-big-CompressionInfo.db").write_bytes(_compression_info(700, 64, True))
    other = tmp_path / "n1" / "data" / "ks" / "journals-0c2d"
    other.mkdir(parents=True)
    (other / "nb-1-big-CompressionInfo.db").write_bytes(_compression_info(999, 64, True))
    assert data_bytes(tmp_path, "ks", "journal_ids") == 1000


def test_the_largest_partition_projects_linearly_and_gives_the_buckets_it_needs() -> None:
    # 4 buckets of 10,000,000 journals' rows (one 10% above the mean), 50 bytes a row
    rows = (2_750_000, 2_500_000, 2_500_000, 2_250_000)
    parts = Partitions(10_000_000, rows, 500_000_000, 110_000_000)
    assert parts.bytes_per_row == 50
    assert parts.largest_bytes == 137_500_000
    assert parts.mean_bytes == 125_000_000
    assert parts.projected_largest() == pytest.approx(13.75e9)  # x100 journals
    assert parts.projected_largest(buckets=400) == pytest.approx(137.5e6)
    assert parts.buckets_for() == 550  # 13.75e9 x 4 buckets / 100 MB
    assert parts.projected_largest(buckets=parts.buckets_for()) <= 100e6
    assert parts.projected_largest(buckets=parts.buckets_for() - 1) > 100e6
    assert [power_of_two_above(n) for n in (1, 32, 33, 550)] == [1, 32, 64, 1024]


def test_the_section_holds_each_series_against_the_baseline_and_the_projection() -> None:
    series = ("deep", "through", "rare", "slice", "pointers")

    def measured(journals: int, ms: float) -> Measured:
        rows = (journals // 2, journals // 2)
        parts = Partitions(journals, rows, journals * 50, journals * 10)
        return Measured(journals, 10.0, {k: [ms] * 10 for k in series}, parts, 16, 1)

    section = section_of(measured(10_000_000, 6.0), measured(100_000, 3.0))
    rows = {row.name: row for row in section.rows}
    deep = rows[
        "a prefix page of 100, the common prefix (order-), at a random depth, "
        "10,000,000 journals: p99"
    ]
    assert (deep.value, deep.baseline, deep.ratio) == (6.0, 3.0, 2.0)
    assert rows["writing 10,000,000 journals' ids"].value == 1_000_000
    largest = rows["journal_ids at 10^9 journals, 2 buckets: the largest partition"]
    assert largest.value == pytest.approx(25_000.0)  # MB
    assert largest.met is False
    assert rows["journal_ids at 10^9 journals: buckets for a partition <= 100 MB"].value == 500


def test_a_grown_listing_is_written_in_its_numbers_and_named_against_32() -> None:
    """`--listing-buckets 512`: ids go to the 512-bucket generation's numbers (512..1023), and
    the rows name both counts, the baseline being the same journals over 32."""
    from journal.core import listing_bucket

    batches = list(bucket_batches(journal_ids(2000, seed=3), 10, 512))
    assert all(512 <= bucket < 1024 for bucket, _ in batches)
    assert all(listing_bucket(i, 512) == bucket for bucket, group in batches for i in group)
    series = ("deep", "through", "rare", "slice", "pointers")

    def measured(buckets: int, ms: float) -> Measured:
        parts = Partitions(20_000, (20_000 // buckets,) * buckets, 20_000 * 50, 20_000 * 10)
        return Measured(20_000, 1.0, {k: [ms] * 10 for k in series}, parts, 1, 0)

    section = section_of(measured(512, 12.0), measured(32, 4.0))
    rows = {row.name: row for row in section.rows}
    page = rows[
        "a prefix page of 100, the common prefix (order-), at a random depth, "
        "20,000 journals, 512 buckets: p50"
    ]
    assert (page.value, page.baseline, page.ratio) == (12.0, 4.0, 3.0)
    assert page.note == "baseline: 20,000 journals, 32 buckets"
