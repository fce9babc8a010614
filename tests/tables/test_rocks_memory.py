"""The worker's table databases share one RocksDB memory budget (issue 43): one block cache,
their memtables charged to it, whatever the number of databases; Faust's own options give each
database a cache and buffers of its own."""

from __future__ import annotations

from pathlib import Path

from faust.stores import rocksdb

from tables.store import RocksMemory

BUDGET = 16 * 1024**2
DATABASES = 6


def test_every_database_uses_the_one_budget(tmp_path: Path) -> None:
    memory = RocksMemory(BUDGET, max_open_files=600, databases=DATABASES)
    assert memory.max_open_files == 100  # the worker's files, divided among its databases
    assert memory.write_buffer_size == BUDGET // 2 // DATABASES
    options = memory.options(rocksdb.RocksDBOptions(use_rocksdict=True))
    dbs = [options.open(tmp_path / f"db{n}") for n in range(DATABASES)]
    try:
        value = b"x" * 1024
        for n, db in enumerate(dbs):  # 6 x 4 MiB: more than the whole budget
            for key in range(4096):
                db[b"%d-%d" % (n, key)] = value
        # every database's memtables are counted in the one manager, which flushes past half
        # the budget; without it each held up to its own 3 x 64 MiB
        assert 0 < memory.buffers.get_usage() <= BUDGET // 2 + memory.write_buffer_size
        for db in dbs:
            db.flush()  # what follows is read from files, through the block cache
        for n, db in enumerate(dbs):
            for key in range(0, 4096, 3):
                assert db[b"%d-%d" % (n, key)] == value
        # every database's blocks went to the one cache (~14 MiB here; with a cache per
        # database the shared one holds only the memtables' charge), which stays in the budget
        assert BUDGET // 2 < memory.cache.get_usage() <= BUDGET * 1.1  # LRU: a block over
    finally:
        for db in dbs:
            db.close()
