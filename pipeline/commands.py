"""`kafka-journal pipeline rebuild|audit|export|import`: the Spark jobs' command line, a program
of its own (`python -m pipeline.commands`), which `kafka-journal pipeline` runs.

Contract: as every command of `app/cli.py`, whose helpers it uses: the settings' flags come
from `Settings`, a bad setting exits 2 naming its variable or flag, and `--help` never loads
PySpark (the jobs, pipeline/cli.py, load on use). The exit code is the job's (pipeline/cli.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from app.cli import CONTEXT, load, needs_extra, run_group, settings_options
from journal.settings import Settings

_F = TypeVar("_F", bound=Callable[..., Any])


@click.group(context_settings=CONTEXT)
def pipeline() -> None:
    """Batch jobs on Spark: rebuild | audit | export | import."""


def _pipeline_command(function: _F) -> _F:
    function = needs_extra("spark")(function)
    function = settings_options(Settings)(function)
    function = click.option(
        "--shuffle-partitions", type=click.IntRange(min=1), default=8, show_default=True
    )(function)
    return click.option("--master", default="local[*]", show_default=True, help="Spark master")(
        function
    )


def _run_pipeline(job: Any, master: str, shuffle_partitions: int, values: Mapping[str, Any]) -> int:
    settings = load(Settings, values)
    from pipeline.cli import run
    from pipeline.session import SparkOptions

    return run(job, settings, SparkOptions(master=master, shuffle_partitions=shuffle_partitions))


@pipeline.command()
@_pipeline_command
@click.option(
    "--from",
    "start_from",
    type=click.Choice(["pointers", "earliest"]),
    default="pointers",
    show_default=True,
    help="start after the keyspace's pointers or at Kafka's earliest offsets",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True)
def rebuild(
    master: str, shuffle_partitions: int, start_from: str, batch_size: int, **values: Any
) -> int:
    """Replicate the action topic into a keyspace."""
    from pipeline.cli import Rebuild

    job = Rebuild("earliest" if start_from == "earliest" else "pointers", batch_size)
    return _run_pipeline(job, master, shuffle_partitions, values)


@pipeline.command()
@_pipeline_command
def audit(master: str, shuffle_partitions: int, **values: Any) -> int:
    """Compare Kafka with Cassandra; exit 1 on a difference."""
    from pipeline.cli import Audit

    return _run_pipeline(Audit(), master, shuffle_partitions, values)


@pipeline.command()
@_pipeline_command
@click.option("--out", required=True, help="output directory")
@click.option("--all-topics", is_flag=True, help="not only --topic")
@click.option("--overwrite", is_flag=True, help="replace an existing --out")
@click.option(
    "--plaintext",
    is_flag=True,
    help="open encrypted payloads with the KEK (the files then hold personal data in clear; "
    "erased journals are left out): docs/erasure.md",
)
def export(
    master: str,
    shuffle_partitions: int,
    out: str,
    all_topics: bool,
    overwrite: bool,
    plaintext: bool,
    **values: Any,
) -> int:
    """Journals from Cassandra to Parquet (encrypted payloads as ciphertext unless --plaintext)."""
    from pipeline.cli import Export

    job = Export(out, all_topics=all_topics, overwrite=overwrite, plaintext=plaintext)
    return _run_pipeline(job, master, shuffle_partitions, values)


@pipeline.command("import")
@_pipeline_command
@click.option("--source", required=True, help="an export's directory (pipeline export --out)")
@click.option("--all-topics", is_flag=True, help="not only --topic")
def import_(
    master: str, shuffle_partitions: int, source: str, all_topics: bool, **values: Any
) -> int:
    """An export from Parquet into an empty keyspace, then an audit; exit 2 if the keyspace
    is not empty, 1 if the audit finds a difference."""
    from pipeline.cli import Import

    job = Import(source, all_topics=all_topics)
    return _run_pipeline(job, master, shuffle_partitions, values)


def main(argv: list[str] | None = None) -> int:
    """Run the pipeline's commands on `argv` (default: the process's); the exit code."""
    return run_group(pipeline, "kafka-journal pipeline", argv)


if __name__ == "__main__":
    sys.exit(main())
