"""`kafka-journal pipeline rebuild|audit|export|import`: the jobs behind the command line.

Contract: `pipeline/commands.py` declares the options (so `--help` never loads PySpark), builds
the settings (flags over `KJ_*` variables over local defaults, the one loader of
`kjconfig.settings`) and calls `run(job, settings, options)`, which starts a SparkSession on
`options.master`, runs the job and returns the exit code: 0, or 1 when the audit (its own, or
the one after an import) found a difference, 2 when an import's keyspace is not empty or a
plaintext export has no key-encryption key.
Progress goes to stderr, the report (one line for rebuild, export and import, the audit's
report) to stdout.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import SparkSession

from journal.settings import Settings
from pipeline.audit import audit
from pipeline.export import PlaintextRefused, export
from pipeline.grown import PredecessorBehind
from pipeline.rebuild import rebuild
from pipeline.report import print_progress
from pipeline.restore import KeyspaceNotEmpty, restore
from pipeline.session import SparkOptions, spark_session


@dataclass(frozen=True, slots=True)
class Rebuild:
    start_from: Literal["pointers", "earliest"] = "pointers"
    batch_size: int = 1000


@dataclass(frozen=True, slots=True)
class Audit:
    pass


@dataclass(frozen=True, slots=True)
class Export:
    out: str
    all_topics: bool = False
    overwrite: bool = False
    plaintext: bool = False


@dataclass(frozen=True, slots=True)
class Import:
    source: str
    all_topics: bool = False


PipelineJob = Rebuild | Audit | Export | Import


def run(job: PipelineJob, settings: Settings, options: SparkOptions) -> int:
    """Run `job` on a session of its own, stopped at the end, as the replicator principal
    (it reads the topic and writes the store, as replication does)."""
    spark = spark_session(options, print_progress)
    try:
        return asyncio.run(execute(job, spark, settings.replace(role="replicator")))
    finally:
        spark.stop()


async def execute(job: PipelineJob, spark: SparkSession, settings: Settings) -> int:
    """Run `job` on `spark`; the exit code."""
    if isinstance(job, Rebuild):
        try:
            rebuilt = await rebuild(spark, settings, job.start_from, job.batch_size)
        except PredecessorBehind as error:
            print(f"rebuild refused: {error}")
            return 2
        c = rebuilt.counts
        print(
            f"rebuild: {c.records} records, {c.events} events written, {c.malformed} malformed, "
            f"pointers {dict(sorted(rebuilt.pointers.items()))}, {rebuilt.seconds:.1f} s"
        )
        return 0
    if isinstance(job, Audit):
        try:
            audited = await audit(spark, settings)
        except PredecessorBehind as error:
            print(f"audit refused: {error}")
            return 2
        print("\n".join(audited.lines()))
        return 0 if audited.ok else 1
    if isinstance(job, Import):
        try:
            imported = await restore(spark, settings, job.source, all_topics=job.all_topics)
        except KeyspaceNotEmpty as error:
            print(f"import refused: {error}")
            return 2
        counts = imported.counts
        print(f"import: {counts.events} events of {counts.journals} journals from {job.source}")
        audited = await audit(spark, settings)  # what Kafka still holds against the import
        print("\n".join(audited.lines()))
        return 0 if audited.ok else 1
    try:
        exported = await export(
            spark,
            settings,
            job.out,
            all_topics=job.all_topics,
            overwrite=job.overwrite,
            plaintext=job.plaintext,
        )
    except PlaintextRefused as error:
        print(f"export refused: {error}")
        return 2
    erased = f", {exported.erased} erased journals left out" if job.plaintext else ""
    print(f"export: {exported.rows} events in {exported.files} files under {job.out}{erased}")
    return 0
