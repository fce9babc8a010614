"""The `kafka-journal` command line: one entry point, one subcommand per concern.

Contract: `main(argv)` returns the exit code. Each subcommand is registered by a small
`_add_<name>` function that declares its arguments and a handler; handlers import their
implementation lazily, so `kafka-journal --help` and `kafka-journal stack status` never load
Faust, aiohttp or PySpark. Subcommands that own their whole argument syntax (like `stack`)
take the rest of the command line verbatim and parse it themselves.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import WorkerSettings

Handler = Callable[[argparse.Namespace], int]


def _run_stack(args: argparse.Namespace) -> int:
    from stack.cli import run

    rest: list[str] = args.rest
    return run(rest)


def _add_stack(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "stack",
        help="run real Kafka and Cassandra locally: up | down | status",
        add_help=False,  # `stack --help` is answered by stack.cli itself
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    parser.set_defaults(handler=_run_stack, takes_rest=True)


def _add_worker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--web-port", type=int, help="HTTP port (KJ_WEB_PORT, default 6066)")
    parser.add_argument("--web-host", help="HTTP address (KJ_WEB_HOST, default 127.0.0.1)")
    parser.add_argument("--datadir", help="tables' local state (KJ_DATADIR, .worker/<port>)")
    parser.add_argument("--instance-id", help="static group membership id (KJ_INSTANCE_ID)")
    parser.add_argument("--loglevel", default="info")


def _worker_settings(args: argparse.Namespace) -> WorkerSettings:
    from app.settings import WorkerSettings

    return WorkerSettings.from_env(
        web_port=args.web_port,
        web_host=args.web_host,
        datadir=args.datadir,
        instance_id=args.instance_id,
    )


def _run_worker(args: argparse.Namespace) -> int:
    from app.worker import run_worker

    return run_worker(_worker_settings(args), loglevel=args.loglevel)


def _add_worker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("worker", help="run a Faust worker serving the HTTP API")
    _add_worker_options(parser)
    parser.set_defaults(handler=_run_worker)


def _run_run(args: argparse.Namespace) -> int:
    from app.worker import run_worker
    from stack import Stack

    stack = Stack()
    stack.up()
    print("Kafka and Cassandra are up; `kafka-journal stack down` stops them.", flush=True)
    return run_worker(_worker_settings(args), loglevel=args.loglevel)


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "run", help="the main job: start the stack (Kafka, Cassandra) and a worker"
    )
    _add_worker_options(parser)
    parser.set_defaults(handler=_run_run)


def _run_pipeline(args: argparse.Namespace) -> int:
    from pipeline.cli import run

    return run(args)


def _add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--topic", help="the action topic (KJ_TOPIC, default journal)")
    parser.add_argument("--keyspace", help="Cassandra keyspace (KJ_KEYSPACE, default journal)")
    parser.add_argument("--bootstrap", help="Kafka (KJ_KAFKA_BOOTSTRAP, default 127.0.0.1:9092)")
    parser.add_argument(
        "--cassandra-hosts", help="comma-separated (KJ_CASSANDRA_HOSTS, default 127.0.0.1)"
    )
    parser.add_argument("--cassandra-port", type=int, help="(KJ_CASSANDRA_PORT, default 9042)")
    parser.add_argument(
        "--segment-size", type=int, help="events per partition of new journals (KJ_SEGMENT_SIZE)"
    )
    parser.add_argument("--shuffle-partitions", type=int, default=8, help="default 8")


def _add_pipeline(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("pipeline", help="batch jobs on Spark: rebuild | audit | export")
    jobs = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    rebuild = jobs.add_parser("rebuild", help="replicate the action topic into a keyspace")
    rebuild.add_argument(
        "--from",
        dest="start_from",
        choices=("pointers", "earliest"),
        default="pointers",
        help="start after the keyspace's pointers (default) or at Kafka's earliest offsets",
    )
    rebuild.add_argument("--batch-size", type=int, default=1000, help="records per batch")
    audit = jobs.add_parser("audit", help="compare Kafka with Cassandra; exit 1 on a difference")
    export = jobs.add_parser("export", help="journals from Cassandra to Parquet")
    export.add_argument("--out", required=True, help="output directory")
    export.add_argument("--all-topics", action="store_true", help="not only --topic")
    export.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    for job in (rebuild, audit, export):
        _add_pipeline_options(job)
    parser.set_defaults(handler=_run_pipeline)


def _run_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.run import run

    out: str | None = args.out
    return run(args.quick, Path(out) if out else Path.cwd())


def _add_bench(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "bench", help="measure against raw baselines and write BENCHMARKS.md (+ PNG plots)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: prove the harness")
    parser.add_argument("--out", help="directory for BENCHMARKS.md and docs/bench (default .)")
    parser.set_defaults(handler=_run_bench)


# Add a subcommand: write `_add_<name>(commands)` setting `handler`, and list it here.
def _add_client(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.client import add_client_commands  # argparse only; the client loads on use

    add_client_commands(commands)


_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    _add_stack,
    _add_worker,
    _add_run,
    _add_client,
    _add_pipeline,
    _add_bench,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-journal",
        description="An event-sourcing journal on Kafka with Cassandra as the eventual store.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # parse_known_args: argparse's REMAINDER cannot start with an option (`stack --help`), so
    # options the main parser does not know are handed to subcommands that parse their own.
    args, unknown = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if unknown:
        if not getattr(args, "takes_rest", False):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.rest = unknown + args.rest
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
