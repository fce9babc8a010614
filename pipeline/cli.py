"""`kafka-journal pipeline rebuild|audit|export`: the jobs behind the command line.

Contract: `app/cli.py` declares the arguments (so `--help` never loads PySpark) and calls
`run(args)`, which builds the settings (flags over `KJ_*` variables over local defaults, as
`Settings.from_env`), starts a SparkSession on `--master`, runs the job and returns the exit
code: 0, or 1 when the audit found a difference. Progress goes to stderr, the report (one
line for rebuild and export, the audit's report) to stdout.
"""

from __future__ import annotations

import argparse
import asyncio

from pyspark.sql import SparkSession

from journal.settings import Settings
from pipeline.audit import audit
from pipeline.export import export
from pipeline.rebuild import rebuild
from pipeline.report import print_progress
from pipeline.session import SparkOptions, spark_session


def settings_of(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        kafka_bootstrap=args.bootstrap,
        cassandra_hosts=args.cassandra_hosts,
        cassandra_port=args.cassandra_port,
        topic=args.topic,
        keyspace=args.keyspace,
        segment_size=args.segment_size,
    )


def run(args: argparse.Namespace) -> int:
    """Run the job `args.job` on a session of its own, stopped at the end."""
    options = SparkOptions(master=args.master, shuffle_partitions=args.shuffle_partitions)
    spark = spark_session(options, print_progress)
    try:
        return asyncio.run(execute(args, spark, settings_of(args)))
    finally:
        spark.stop()


async def execute(args: argparse.Namespace, spark: SparkSession, settings: Settings) -> int:
    """Run the job `args.job` on `spark`; the exit code."""
    if args.job == "rebuild":
        rebuilt = await rebuild(spark, settings, args.start_from, args.batch_size)
        c = rebuilt.counts
        print(
            f"rebuild: {c.records} records, {c.events} events written, {c.malformed} malformed, "
            f"pointers {dict(sorted(rebuilt.pointers.items()))}, {rebuilt.seconds:.1f} s"
        )
        return 0
    if args.job == "audit":
        audited = await audit(spark, settings)
        print("\n".join(audited.lines()))
        return 0 if audited.ok else 1
    if args.job == "export":
        exported = await export(
            spark, settings, args.out, all_topics=args.all_topics, overwrite=args.overwrite
        )
        print(f"export: {exported.rows} events in {exported.files} files under {args.out}")
        return 0
    raise ValueError(f"unknown pipeline job {args.job!r}")
