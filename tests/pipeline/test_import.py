"""`pipeline import`: an export restored into an empty keyspace, audited, read back as the
journal API read the original; a keyspace that is not empty is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from journal.client.journals import Journals
from journal.core.model import Ack
from pipeline.cli import Import, execute
from pipeline.export import export
from stack import Stack
from tests.journal.journal_contract import events
from tests.support.harness import harness, unique

pytestmark = pytest.mark.integration


async def test_an_export_imported_into_an_empty_keyspace_reads_and_audits_as_the_original(
    stack: Stack, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(stack, unique("imp_a"), "imp", 2) as h:
        for journal_id in ("plain", "deleted", "several"):
            await h.journals.journal(journal_id).append(events(1, 3), ack=Ack.KAFKA)
        await h.journals.journal("deleted").delete(2)
        await h.journals.journal("deleted").append(events(4, 5), ack=Ack.KAFKA)
        await h.journals.journal("several").append(events(4, 4), ack=Ack.KAFKA)
        await h.replicate()
        out = str(tmp_path / "export")
        await export(spark, h.settings, out, progress=lambda line: None)

        restored = h.settings.replace(keyspace=unique("imp_c"))
        capsys.readouterr()
        assert await execute(Import(out), spark, restored) == 0
        report = capsys.readouterr().out
        assert "import: 10 events of 3 journals" in report, report
        async with await Journals.connect(restored) as journals:
            for journal_id in ("plain", "deleted", "several"):
                original = [r async for r in h.journals.journal(journal_id).read()]
                imported = [r async for r in journals.journal(journal_id).read()]
                assert imported == original, journal_id
            info = await journals.journal("deleted").info()
            assert (info.seq_nr, info.delete_to) == (5, 2)

        # not empty now: a second import is refused, and changes nothing
        assert await execute(Import(out), spark, restored) == 2
        assert "import refused: keyspace" in capsys.readouterr().out
