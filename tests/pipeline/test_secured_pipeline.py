"""The Spark rebuild and audit against the secured stack, as the replicator principal."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from journal.client.journals import Journals
from journal.core.model import Event, JsonPayload
from pipeline.audit import audit
from pipeline.rebuild import rebuild
from stack import Stack
from tests.support.secured import granted_journal

pytestmark = [pytest.mark.integration, pytest.mark.secured, pytest.mark.tls]


async def test_rebuild_and_audit_run_as_the_replicator(
    secured_stack: Stack, spark: SparkSession
) -> None:
    granted = await granted_journal(secured_stack)
    async with await Journals.connect(granted.settings) as client:
        for journal_id in ("a-1", "b-1"):
            await client.journal(journal_id).append([Event(1, payload=JsonPayload.of(1)), Event(2)])
        replicator = granted.as_role("replicator")  # Kafka: Read; Cassandra: journal_writer
        result = await rebuild(spark, replicator, "earliest", progress=lambda line: None)
        assert result.counts.events == 4
        meta = await client.store.meta(client.journal("b-1").key)
        assert meta is not None and meta.seq_nr == 2
        audited = await audit(spark, replicator, progress=lambda line: None)
        assert audited.ok, audited.lines()
