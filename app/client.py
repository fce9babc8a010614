"""`kafka-journal append|read|state|delete|purge|subscribe|journals`: the direct client on
the command line.

Input and output use the HTTP API's JSON forms, so a body that works with curl works here:
`append` takes the POST body (from `--data` or standard input; `--expected-seq-nr`,
`--idempotency-key` and `--ack` as the API's `expectedSeqNr`, `Idempotency-Key` and `ack`),
`read` prints NDJSON lines,
`journals` prints ids one a line, the others print the JSON object the API answers with. Bad
input exits 2 with the API's error message; everything goes through the same validation as HTTP.

`app/cli.py` declares the commands; each calls `run_client` with what it does to the journal.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO

from app.confirm import failed as _failed

if TYPE_CHECKING:  # the command line loads the client (Kafka, Cassandra) only when it runs
    from journal import Journal
    from journal.errors import OutcomeUnknown
    from journal.settings import Settings
    from journal.subscriptions import GroupStatus
    from web.validation import ParsedAppend

JournalCommand = Callable[["Journal", BinaryIO], Awaitable[None]]
SEQ_NR_CONFLICT_EXIT = 3  # a conditional append found the journal elsewhere
OUTCOME_UNKNOWN_EXIT = 75  # EX_TEMPFAIL: retry with the same --idempotency-key to learn it
JOURNAL_ERASED_EXIT = 4  # the journal was erased (docs/erasure.md): for good


def parse_append_body(data: str | None) -> ParsedAppend:
    """The append's POST body, from `--data` or else standard input, parsed as HTTP does."""
    from web.validation import parse_append

    return parse_append(data.encode() if data is not None else sys.stdin.buffer.read())


def append(
    data: str | None,
    expected_seq_nr: int | None = None,
    idempotency_key: str | None = None,
    ack: str = "verified",
) -> JournalCommand:
    """`expected_seq_nr` (when given) stands for the body's `expectedSeqNr`; `ack` is the
    API's (verified: answered once the log accepted the append; kafka: at Kafka's ack). An
    append at the end without `idempotency_key` gets a fresh one, as the direct client's, so
    that it is safe to repeat (the key is on stderr when the outcome is unknown)."""
    from journal import Ack
    from journal.client import FreshKey, check_idempotency_key

    request = parse_append_body(data)  # before connecting: bad input costs no round trip
    key: str | FreshKey = (
        FreshKey.FRESH if idempotency_key is None else check_idempotency_key(idempotency_key)
    )
    expected = request.expected_seq_nr if expected_seq_nr is None else expected_seq_nr

    async def command(journal: Journal, out: BinaryIO) -> None:
        from journal.client import append_events
        from web.representation import appended_json

        appended = await append_events(
            journal,
            request.events,
            metadata=request.metadata,
            headers=request.headers,
            expected_seq_nr=expected,
            idempotency_key=key,
            ack=Ack(ack),
        )
        out.write(appended_json(appended) + b"\n")

    return command


def read(from_: int, to: int, limit: int | None) -> JournalCommand:
    async def command(journal: Journal, out: BinaryIO) -> None:
        from web.representation import event_line

        async for record in journal.read(from_, to, limit):
            out.write(event_line(record))

    return command


def state(journal_id: str) -> JournalCommand:
    async def command(journal: Journal, out: BinaryIO) -> None:
        from web.representation import info_out
        from web.schema import to_json

        out.write(to_json(info_out(journal_id, await journal.info())) + b"\n")

    return command


def delete(to: int) -> JournalCommand:
    async def command(journal: Journal, out: BinaryIO) -> None:
        from web.representation import deleted_out
        from web.schema import to_json

        out.write(to_json(deleted_out(await journal.delete(to))) + b"\n")

    return command


def purge() -> JournalCommand:
    async def command(journal: Journal, out: BinaryIO) -> None:
        from web.representation import position_out
        from web.schema import to_json

        out.write(to_json(position_out(await journal.purge())) + b"\n")

    return command


def subscribe(settings: Settings, after: str | None, tags: str | None, live: bool) -> int:
    """`kafka-journal subscribe`: the lines of `GET /events`, flushed one by one; 2 for a
    bad position. Ctrl-C ends a live one quietly."""
    from journal import SubscriptionPosition
    from journal.errors import InvalidValue
    from web.validation import AFTER_END

    from_end = after == AFTER_END
    try:
        position = None if after is None or from_end else SubscriptionPosition.parse(after)
    except InvalidValue as error:
        return _failed("subscribe", f"invalid_query: --after: {error}", 2)
    wanted = [tag for tag in (tags or "").split(",") if tag]

    async def run() -> None:
        from journal import Journals
        from web.representation import SubscriptionLines

        journals = await Journals.connect(settings)
        try:
            out, lines = sys.stdout.buffer, SubscriptionLines()
            start = await journals.end_position() if from_end else position
            async for item in journals.subscribe(start, wanted, live):
                out.write(lines.line(item))
                out.flush()
        finally:
            await journals.close()

    from journal.errors import JournalTruncated, Unavailable

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 0
    except Unavailable as error:  # resume later with --after the last position printed
        return _failed("subscribe", f"unavailable: {error}", OUTCOME_UNKNOWN_EXIT)
    except JournalTruncated as error:
        return _failed("subscribe", f"journal_truncated: {error}", 1)
    return 0


def subscribe_group(settings: Settings, name: str, tags: str | None) -> int:
    """`kafka-journal subscribe --group`: a member's events as `GET /events` lines (their
    `position` that of the event in its record), each acknowledged once written; 2 for a
    bad name. Ctrl-C leaves the group, committing what was printed."""
    from journal.errors import InvalidValue, JournalTruncated, Unavailable

    wanted = [tag for tag in (tags or "").split(",") if tag]

    async def run() -> None:
        from journal import Journals
        from web.representation import group_line

        journals = await Journals.connect(settings)
        try:
            async with journals.subscribe_group(name, wanted) as member:
                out = sys.stdout.buffer
                async for batch in member.batches():
                    out.write(b"".join(group_line(event) for event in batch))
                    out.flush()
                    member.ack(*(event.position for event in batch))
        finally:
            await journals.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 0
    except InvalidValue as error:
        return _failed("subscribe", f"invalid_query: --group: {error}", 2)
    except Unavailable as error:  # run it again: the group resumes at its checkpoint
        return _failed("subscribe", f"unavailable: {error}", OUTCOME_UNKNOWN_EXIT)
    except JournalTruncated as error:
        return _failed("subscribe", f"journal_truncated: {error}", 1)
    return 0


def show_groups(settings: Settings) -> int:
    """`kafka-journal groups`: a table of each group's partitions (member, checkpoint, end,
    lag); past the topic's own, its grown successors' (the topic and partition in the last
    column), as the registry in the store has them."""
    from journal.errors import Unavailable
    from journal.store import CassandraStore
    from journal.subscriptions import group_statuses

    async def statuses() -> list[GroupStatus]:
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            return await group_statuses(settings.kafka_access(), settings.topic, store)
        finally:
            await store.close()

    try:
        listed = asyncio.run(statuses())
    except Unavailable as error:
        return _failed("groups", f"unavailable: {error}", OUTCOME_UNKNOWN_EXIT)
    print(
        f"{'group':<24} {'state':<12} {'partition':>9} {'checkpoint':>10} {'end':>10} "
        f"{'lag':>8}  {'member':<40} in topic"
    )
    for status in listed:
        for p in status.partitions:
            checkpoint = "-" if p.committed is None else str(p.committed)
            print(
                f"{status.name:<24} {status.state:<12} {p.partition:>9} {checkpoint:>10} "
                f"{p.end:>10} {p.lag:>8}  {p.member or '-':<40} {p.topic}/{p.topic_partition}"
            )
    return 0


def reset_group(
    settings: Settings,
    name: str,
    to_time: str | None,
    partitions: tuple[int, ...],
    dry_run: bool,
    yes: bool,
) -> int:
    """`kafka-journal groups reset`: print each checkpoint's move (of `partitions`, or every
    partition: the topic's and its grown successors', as `groups` numbers them), ask (or
    `yes`), commit them; 2 for a bad time or name, 1 while a member is active or when not
    confirmed (app/confirm.py)."""
    from datetime import datetime

    from app.confirm import NotConfirmed, confirm
    from journal.errors import InvalidValue, Unavailable
    from journal.store import CassandraStore
    from journal.subscriptions import commit_reset, plan_reset

    try:
        time_ms = None if to_time is None else _time_ms(datetime.fromisoformat(to_time))
    except ValueError as error:
        return _failed("groups reset", f"invalid_query: --to-time: {error}", 2)
    kafka, topic = settings.kafka_access(), settings.topic

    async def run() -> int:
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            moves = await plan_reset(kafka, topic, name, time_ms, partitions or None, store)
            for move in moves:
                before = "none" if move.before is None else move.before
                where = "" if move.topic == topic else f" ({move.topic} {move.topic_partition})"
                print(
                    f"{name} partition {move.partition}{where}: checkpoint {before} -> {move.after}"
                )
            if dry_run:
                print(f"{name}: nothing committed (dry run)")
                return 0
            confirm(f"move {len(moves)} checkpoints of group {name}?", yes)
            await commit_reset(kafka, topic, name, moves, store)
            print(f"{name}: {len(moves)} checkpoints moved")
            return 0
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except InvalidValue as error:
        return _failed("groups reset", str(error), 1)
    except NotConfirmed as declined:
        return _failed("groups reset", str(declined), declined.exit_code)
    except Unavailable as error:
        return _failed("groups reset", f"unavailable: {error}", OUTCOME_UNKNOWN_EXIT)


def _time_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"{moment.isoformat()} has no time zone")
    return int(moment.timestamp() * 1000)


async def _run(settings: Settings, journal_id: str, command: JournalCommand) -> None:
    from journal import Journals

    journals = await Journals.connect(settings)
    try:
        out = sys.stdout.buffer
        await command(journals.journal(journal_id), out)
        out.flush()
    finally:
        await journals.close()


def list_ids(settings: Settings, prefix: str, after: str | None, limit: int | None) -> int:
    """Print the ids of `Journals.ids`, page after page, at most `limit` of them."""
    from journal import Journals
    from journal.client import MAX_LIMIT

    async def listing() -> None:
        journals = await Journals.connect(settings)
        try:
            out, cursor, remaining = sys.stdout.buffer, after, limit
            while remaining is None or remaining > 0:
                page = await journals.ids(prefix, cursor, min(remaining or MAX_LIMIT, MAX_LIMIT))
                out.writelines(journal_id.encode("utf-8") + b"\n" for journal_id in page.ids)
                if remaining is not None:
                    remaining -= len(page.ids)
                if page.next is None:
                    break
                cursor = page.next
            out.flush()
        finally:
            await journals.close()

    asyncio.run(listing())
    return 0


def _repeat(error: OutcomeUnknown) -> str:
    """How to learn an unknown outcome by repeating the command."""
    if error.idempotency_key is not None:
        return f"; repeat with --idempotency-key {error.idempotency_key} to learn it"
    if not error.repeatable:
        return "; not safe to repeat without an idempotency key: read the journal"
    return "; repeat the same command to learn it"


def run_client(
    name: str, settings: Settings, journal_id: str, prepare: Callable[[], JournalCommand]
) -> int:
    """Check the input (`prepare`), then run the command it gives on the journal; 0, or 2 with
    the API's error on stderr for bad input."""
    from journal.errors import JournalErased, OutcomeUnknown, SeqNrConflict
    from web.error_answers import ApiError

    try:
        command = prepare()
        asyncio.run(_run(settings, journal_id, command))
    except ApiError as error:
        return _failed(name, f"{error.code}: {error.message}", 2)
    except SeqNrConflict as conflict:
        return _failed(name, f"seq_nr_conflict: {conflict}", SEQ_NR_CONFLICT_EXIT)
    except OutcomeUnknown as error:
        return _failed(name, f"outcome_unknown: {error}{_repeat(error)}", OUTCOME_UNKNOWN_EXIT)
    except JournalErased as error:
        return _failed(name, f"journal_erased: {error}", JOURNAL_ERASED_EXIT)
    except ValueError as error:
        return _failed(name, str(error), 2)
    return 0
