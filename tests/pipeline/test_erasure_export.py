"""Exports of encrypted journals (docs/erasure.md), on the real servers and Spark local[2]: an
export holds ciphertext as stored (rebuild and audit carry it unchanged), which opens no more
once the journal is erased; a plaintext
export opens payloads with the KEK, warns, and leaves an erased journal's events out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from pyspark.sql import SparkSession

from app.grow import grow_topic
from journal.client import data_keys_of
from journal.client.journals import Journals
from journal.codec.envelope import APPEND_REF, is_append_envelope, new_kek_text
from journal.core.grow import Phase
from journal.core.model import BinaryPayload, Event, EventRecord, JournalKey, TextPayload
from journal.errors import JournalErased
from journal.kafka.topic import TopicSpec, ensure_topic, quarantine_topic
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from pipeline.audit import audit
from pipeline.export import (
    PLAINTEXT_WARNING,
    SCHEMA,
    PlaintextRefused,
    event_record_of,
    export,
    export_rows,
)
from pipeline.rebuild import rebuild
from pipeline.restore import restore
from pipeline.scan import token_ranges
from stack import Stack
from tests.journal.test_erasure import Builds, Encrypted, events_with, read, secret
from tests.support.harness import replicate_grown, settings_for, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def encrypted(stack: Stack, keyspace: str) -> AsyncIterator[Encrypted]:
    settings = settings_for(stack, unique("pipe_erasure"), keyspace, partitions=1).model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    store = await CassandraStore.connect(settings.cassandra_config())
    journals = await Journals.connect(settings, store=store)
    try:
        yield Encrypted(settings, store, journals)
    finally:
        await journals.close()
        await store.close()


async def stored_records(store: CassandraStore, key: JournalKey) -> list[EventRecord]:
    meta = await store.meta(key)
    assert meta is not None
    return [record async for record in store.read(key, meta)]


def file_bytes(out: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file())


async def test_an_export_holds_ciphertext_and_a_plaintext_one_leaves_erased_journals_out(
    encrypted: Encrypted, spark: SparkSession, tmp_path: Path
) -> None:
    settings, journals = encrypted.settings, encrypted.journals
    erased_marker, kept_marker = secret(), secret()
    erased_id, kept_id = unique("x_erased"), unique("x_kept")
    await journals.journal(erased_id).append(events_with(erased_marker))
    await journals.journal(kept_id).append(events_with(kept_marker))
    await encrypted.replicate()
    kept = await read(journals, kept_id)

    def quiet(line: str) -> None:
        pass

    sealed = await export(spark, settings, str(tmp_path / "sealed"), tasks=2, progress=quiet)
    assert sealed.rows == 8 and sealed.erased == 0
    blob = file_bytes(tmp_path / "sealed")
    assert erased_marker.encode() not in blob and kept_marker.encode() not in blob
    rows = spark.read.parquet(str(tmp_path / "sealed")).collect()
    with_payload = [event_record_of(row) for row in rows if row["payload_type"] is not None]
    assert len(with_payload) == 6
    # each Append's one envelope on its first event, the reference on the others: written once
    for journal_id in (erased_id, kept_id):
        payloads = sorted(
            (r.event.seq_nr, r.event.payload)
            for r, row in zip(with_payload, [r for r in rows if r["payload_type"]], strict=True)
            if row["id"] == journal_id
        )
        envelope = payloads[0][1]
        assert isinstance(envelope, BinaryPayload) and is_append_envelope(envelope.value)
        assert [p for _, p in payloads[1:]] == [BinaryPayload(APPEND_REF)] * 2

    # an import of the sealed export stores the very values: they decode and open as before
    imported = settings.replace(keyspace=unique("pipe_erasure_i"))
    await restore(spark, imported, str(tmp_path / "sealed"), tasks=2, progress=quiet)
    other = await CassandraStore.connect(imported.cassandra_config())
    try:
        key = JournalKey(settings.topic, kept_id)
        assert await stored_records(other, key) == await stored_records(encrypted.store, key)
        assert journals.encryption is not None
        data_key = await journals.encryption.keys.for_read(key)
        assert data_key is not None
        assert data_key.opener.records(await stored_records(other, key)) == kept
    finally:
        await other.close()

    # rebuild and audit carry the envelopes as they are: a rebuilt keyspace holds the same bytes
    assert (await audit(spark, settings, progress=quiet)).ok
    rebuilt = settings.replace(keyspace=unique("pipe_erasure_b"))
    await rebuild(spark, rebuilt, "earliest", progress=quiet)
    other = await CassandraStore.connect(rebuilt.cassandra_config())
    try:
        for journal_id in (erased_id, kept_id):
            key = JournalKey(settings.topic, journal_id)
            assert await stored_records(other, key) == await stored_records(encrypted.store, key)
    finally:
        await other.close()

    lines: list[str] = []
    opened = await export(
        spark, settings, str(tmp_path / "open"), tasks=2, plaintext=True, progress=lines.append
    )
    assert PLAINTEXT_WARNING in lines
    by_id: dict[str, list[object]] = {}
    for row in spark.read.parquet(str(tmp_path / "open")).collect():
        by_id.setdefault(row["id"], []).append(event_record_of(row))
    assert sorted(by_id[kept_id], key=lambda r: r.event.seq_nr) == kept  # type: ignore[attr-defined]
    assert opened.rows == 8

    await journals.journal(erased_id).erase()
    await encrypted.replicate()
    # the ciphertext already exported opens no more: no process gets the key
    async with await Journals.connect(settings, store=encrypted.store) as fresh:
        assert fresh.encryption is not None
        with pytest.raises(JournalErased):
            await fresh.encryption.keys.for_read(JournalKey(settings.topic, erased_id))
    assert (await audit(spark, settings, progress=quiet)).ok
    after = await export(
        spark, settings, str(tmp_path / "after"), tasks=2, plaintext=True, progress=quiet
    )
    assert (after.rows, after.erased) == (4, 1)
    assert erased_marker.encode() not in file_bytes(tmp_path / "after")
    assert kept_marker.encode() in file_bytes(
        tmp_path / "after"
    )  # what the scan looks for is there

    without_kek: Settings = settings.model_copy(update={"kek": None})
    with pytest.raises(PlaintextRefused, match="KJ_KEK"):
        await export(spark, without_kek, str(tmp_path / "none"), plaintext=True, progress=quiet)


async def test_a_plaintext_export_of_a_grown_topic_opens_with_the_first_topics_keys(
    stack: Stack, keyspace: str
) -> None:
    """A moved journal's rows in NEW were sealed with its one key, kept under the first topic
    (`key_identity`): an export of NEW alone learns the chain from the registry and opens them
    (without it, NEW's id has no key row and its envelopes would be written sealed)."""
    settings = settings_for(stack, unique("journal_growx"), keyspace, 1).model_copy(
        update={"kek": SecretStr(new_kek_text())}
    )
    marker = secret()
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        async with await Journals.connect(settings, store=store) as journals:
            journal = journals.journal("j")
            await journal.append([Event(1, payload=TextPayload(f"{marker}:1"))])
            grow = await grow_topic(settings, store, 2, yes=True)
            assert grow is not None and grow.phase is Phase.DONE
            await journal.append([Event(2, payload=TextPayload(f"{marker}:2"))])
        await replicate_grown(settings, store, 1, passes=2)
        keys = data_keys_of(settings, store)
        rows = []
        for low, high in token_ranges(1):
            rows += [row async for row in export_rows(store, low, high, grow.new_topic, keys)]
        texts = {(row[0], row[1], row[2]): row[9] for row in rows}
        assert texts == {(grow.new_topic, "j", 2): f"{marker}:2"}
    finally:
        await store.close()


async def test_a_plaintext_export_builds_each_event_once_with_its_clear_payload(
    encrypted: Encrypted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plaintext export opens a journal's rows as the store decodes them, with the opener of
    the key it looked up, as a read does: each event built once with its clear payload, none
    rebuilt after the decode."""
    # a topic of its own: only this journal's rows are exported and counted
    settings = encrypted.settings.model_copy(update={"topic": unique("pipe_once_topic")})
    await ensure_topic(settings.kafka_access(), TopicSpec(quarantine_topic(settings.topic), 1))
    store = encrypted.store
    events = events_with(secret())
    async with await Journals.connect(settings, store=store) as journals:
        await journals.journal(unique("x_once")).append(events)
        await Encrypted(settings, store, journals).replicate()
    keys = data_keys_of(settings, store)
    builds = Builds(monkeypatch)
    rows: list[Any] = []
    for low, high in token_ranges(1):
        rows += [row async for row in export_rows(store, low, high, settings.topic, keys)]
    columns = SCHEMA.fieldNames()
    exported = [event_record_of(dict(zip(columns, row, strict=True))).event for row in rows]
    assert exported == events
    assert (builds.built, builds.rebuilt) == (len(events), 0)
