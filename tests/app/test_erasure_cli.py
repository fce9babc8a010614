"""`kafka-journal erase` and `kafka-journal keys rotate` on the real servers (docs/erasure.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.cli import main
from journal.client.journals import Journals
from journal.codec.envelope import new_kek_text
from journal.core.model import Event, TextPayload
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from journal.store.keys import KeyState
from stack import Stack
from tests.support.harness import settings_for, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kek_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("keks")
    old, new = directory / "old.kek", directory / "new.kek"
    old.write_text(new_kek_text())
    new.write_text(new_kek_text())
    return old, new


@pytest.fixture(scope="module")
async def settings(stack: Stack, keyspace: str, kek_files: tuple[Path, Path]) -> Settings:
    return settings_for(stack, unique("journal_erase_cli"), keyspace, 1).model_copy(
        update={"kek_file": kek_files[0]}
    )


async def kafka_journal(settings: Settings, *arguments: str, kek: Path | None = None) -> int:
    """The command line on the settings' servers, topic and keyspace (in a thread: its own
    loop), with `kek` as the KEK file (default: the settings'); its exit code."""
    s = settings
    flags = ["--kafka-bootstrap", s.kafka_bootstrap, "--topic", s.topic, "--keyspace", s.keyspace]
    flags += ["--cassandra-hosts", s.cassandra_hosts, "--cassandra-port", str(s.cassandra_port)]
    flags += ["--kek-file", str(kek or s.kek_file)]
    return await asyncio.to_thread(main, [*arguments, *flags])


@pytest.fixture(scope="module")
async def store(settings: Settings) -> AsyncIterator[CassandraStore]:
    """Connected here (raising if Cassandra does not answer), not in the background."""
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def journals(settings: Settings, store: CassandraStore) -> AsyncIterator[Journals]:
    async with await Journals.connect(settings, store=store) as journals:
        yield journals


async def test_erase_asks_changes_nothing_on_a_dry_run_and_finishes(
    settings: Settings, journals: Journals
) -> None:
    journal_id = unique("cli")
    journal = journals.journal(journal_id)
    await journal.append([Event(1, payload=TextPayload("private"))])

    assert await kafka_journal(settings, "erase", journal_id, "--dry-run") == 0
    assert await kafka_journal(settings, "erase", journal_id) == 2  # no terminal, no --yes
    assert await journal.erasure_state() is KeyState.ACTIVE
    assert [r.event async for r in journal.read()] == [Event(1, payload=TextPayload("private"))]

    assert await kafka_journal(settings, "erase", journal_id, "--yes") == 0
    assert await journal.erasure_state() is KeyState.ERASED
    assert await kafka_journal(settings, "read", journal_id) == 4  # journal_erased
    assert await kafka_journal(settings, "erase", journal_id, "--yes") == 0  # erased already


async def test_a_rotation_rewraps_the_keys_and_the_events_read_under_the_new_kek(
    settings: Settings, journals: Journals, store: CassandraStore, kek_files: tuple[Path, Path]
) -> None:
    old, new = kek_files
    journal_id = unique("rotated")
    await journals.journal(journal_id).append([Event(1, payload=TextPayload("kept"))])

    rotate = ("keys", "rotate", "--yes", "--kek-old-file", str(old))
    assert await kafka_journal(settings, *rotate, kek=new) == 0

    retired = settings.model_copy(update={"kek_file": new})  # the old KEK no longer given
    async with await Journals.connect(retired, store=store) as after:
        events = [r.event async for r in after.journal(journal_id).read()]
    assert events == [Event(1, payload=TextPayload("kept"))]
