"""`kafka-journal append|read|pointer|delete|purge`: the direct client on the command line.

Input and output use the HTTP API's JSON forms, so a body that works with curl works here:
`append` takes the POST body (from `--data` or standard input), `read` prints NDJSON lines,
the others print the JSON object the API answers with. Bad input exits 2 with the API's
error message; everything goes through the same validation as HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from journal.model import SEQ_NR_MAX, check_seq_nr

if TYPE_CHECKING:  # the command line loads the client (Kafka, Cassandra) only when it runs
    from journal.journals import Journal


async def _run(args: argparse.Namespace) -> None:
    from journal.journals import Journals
    from journal.settings import Settings

    journals = await Journals.connect(Settings.from_env(topic=args.topic))
    try:
        await _command(args, journals.journal(args.id))
    finally:
        await journals.close()


async def _command(args: argparse.Namespace, journal: Journal) -> None:
    from web.representation import deleted_out, event_line, info_out, position_out
    from web.schema import to_json
    from web.validation import parse_append

    out = sys.stdout.buffer
    if args.command == "append":
        request = parse_append(args.data.encode() if args.data else sys.stdin.buffer.read())
        position = await journal.append(
            request.events, metadata=request.metadata, headers=request.headers
        )
        out.write(to_json(position_out(position)) + b"\n")
    elif args.command == "read":
        async for record in journal.read(args.from_, args.to, args.limit):
            out.write(event_line(record))
    elif args.command == "pointer":
        out.write(to_json(info_out(args.id, await journal.info())) + b"\n")
    elif args.command == "delete":
        out.write(to_json(deleted_out(await journal.delete(args.to))) + b"\n")
    elif args.command == "purge":
        out.write(to_json(position_out(await journal.purge())) + b"\n")
    out.flush()


def run_client(args: argparse.Namespace) -> int:
    from web.errors import ApiError

    try:
        for name in ("from_", "to"):
            if getattr(args, name, None) is not None:
                check_seq_nr(getattr(args, name), name.rstrip("_"))
        asyncio.run(_run(args))
    except ApiError as error:
        print(f"kafka-journal {args.command}: {error.code}: {error.message}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"kafka-journal {args.command}: {error}", file=sys.stderr)
        return 2
    return 0


def add_client_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help)
        parser.add_argument("id", help="the journal id")
        parser.add_argument("--topic", help="the action topic (KJ_TOPIC, default journal)")
        parser.set_defaults(handler=run_client)
        return parser

    append = command("append", "append events: the HTTP API's POST body, from --data or stdin")
    append.add_argument("--data", help='e.g. \'{"events": [{"seqNr": 1, "payload": 1}]}\'')
    read = command("read", "print the journal's events as NDJSON")
    read.add_argument("--from", dest="from_", type=int, default=1)
    read.add_argument("--to", type=int, default=SEQ_NR_MAX)
    read.add_argument("--limit", type=int)
    command("pointer", "the journal's last seqNr and deleteTo")
    delete = command("delete", "delete events up to --to (at most the last seqNr)")
    delete.add_argument("--to", type=int, required=True)
    command("purge", "remove the whole journal")
