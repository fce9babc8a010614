from __future__ import annotations

import pytest

from journal.store.memory import MemoryStore
from tests.journal.store.contract import SNAPSHOT_LIMIT, EventualStoreContract


class TestMemoryStore(EventualStoreContract):
    @pytest.fixture
    def store(self) -> MemoryStore:
        return MemoryStore(max_snapshot_bytes=SNAPSHOT_LIMIT)
