"""The Spark rebuild of a grown topic (docs/growing.md) on the real servers: the grown topic is
refused until its predecessor is rebuilt through its cuts, then rebuilt with each moved
journal's base, row for row what the workers' replication of it writes."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from app.grow import grow_topic
from journal.client.journals import Journals
from journal.core.grow import Phase
from journal.core.model import Event, JournalKey, TextPayload
from journal.store import cql
from journal.store.cassandra import CassandraStore
from pipeline.audit import audit
from pipeline.grown import PredecessorBehind
from pipeline.rebuild import rebuild
from stack import Stack
from tests.pipeline.rows import rows
from tests.support.harness import replicate_grown, settings_for, unique
from tests.support.raw_store import session_of

pytestmark = pytest.mark.integration


async def test_a_grown_topic_is_rebuilt_after_its_predecessor_with_the_bases(
    stack: Stack, keyspace: str, spark: SparkSession
) -> None:
    settings = settings_for(stack, unique("pipe_grow"), keyspace, 1)
    store = await CassandraStore.connect(settings.cassandra_config())
    try:
        async with await Journals.connect(settings, store=store) as journals:
            for journal_id in ("a", "p"):
                history = [Event(n, payload=TextPayload(f"{journal_id}:{n}")) for n in (1, 2, 3)]
                await journals.journal(journal_id).append(history)
            grow = await grow_topic(settings, store, 2, yes=True, say=lambda line: None)
            assert grow is not None and grow.phase is Phase.DONE
            a = journals.journal("a")
            await a.append([Event(n, payload=TextPayload(f"a:{n}")) for n in (4, 5)])
            await a.delete(2)
            await journals.journal("p").purge()
            await journals.journal("p").append([Event(1, payload=TextPayload("p:new"))])
            await journals.journal("n").append([Event(1, payload=TextPayload("n:1"))])
        # the workers' way, in this keyspace
        assert (await replicate_grown(settings, store, 1, passes=1))[0] > 0
        # the Spark way, into an empty keyspace with the registry restored (the grow command's
        # record: a keyspace rebuilt from nothing needs it), the grown topic after its
        # predecessor only
        rebuilt = settings.replace(keyspace=unique("pipe_growb"))
        grown = rebuilt.replace(topic=grow.new_topic)
        target = await CassandraStore.connect(rebuilt.cassandra_config())
        try:
            await target.record_plan(grow.topic, grow.new_topic, grow.partitions)
            for partition, cut in grow.cut.items():
                await target.record_cut(grow.topic, partition, cut)
            await target.record_phase(grow.topic, Phase.DONE)
        finally:
            await target.close()
        with pytest.raises(PredecessorBehind, match=f"rebuild {settings.topic} first"):
            await rebuild(spark, grown, "earliest", progress=lambda line: None)
        await rebuild(spark, rebuilt, "earliest", progress=lambda line: None)
        await rebuild(spark, grown, "earliest", progress=lambda line: None)
        for table in ("journals", "event_records", "journal_ids", "pointers2"):
            replicated = await rows(store, keyspace, table)
            spark_rows = await rows(store, rebuilt.keyspace, table)
            mine = {k: v for k, v in replicated.items() if k[0] in (settings.topic, grow.new_topic)}
            assert mine and spark_rows == mine, table
        moved = await store.meta(JournalKey(grow.new_topic, "a"))
        assert moved is not None and (moved.base, moved.seq_nr, moved.delete_to) == (3, 5, 2)
        # the audit of the grown topic folds each moved journal from its base: no difference
        # (the rows are the workers' too, compared above); a row whose base is wrong is one
        result = await audit(spark, grown, progress=lambda line: None)
        assert result.ok and result.counts.journals == 3, result.lines()
        await cql.execute(
            session_of(store),
            f"UPDATE {keyspace}.journals USING TIMESTAMP %s SET base = 2 "
            "WHERE topic = %s AND id = 'a'",
            (moved.offset + 2, grow.new_topic),  # newer than the row (a tie keeps the larger)
        )
        result = await audit(spark, settings.replace(topic=grow.new_topic), progress=print)
        kinds = {(d.journal, d.kind, d.detail) for d in result.differences}
        assert kinds == {(f"{grow.new_topic}:a", "journal_differs", "base 2; Kafka: base 3")}
    finally:
        await store.close()
