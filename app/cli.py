"""The `kafka-journal` command line on click: one entry point, one command per concern.

Contract: `main(argv)` returns the exit code. The settings' flags are generated from the
settings models (`settings_options`): each field's flag, `KJ_*` variable, meaning and default
come from the model, so `--help` shows what the loader reads. Commands import their
implementation lazily, so `kafka-journal --help` and `kafka-journal stack status` never load
Faust, aiohttp or PySpark, and the client verbs work in a core install (no extra): a command
that needs an extra (`worker`, `run`, `bench`, `pipeline`) exits 1 naming it when it is
missing. A bad setting exits 2 naming its variable or flag. `pipeline` and
`bench` stand above app: they run as programs of their own (`python -m pipeline.commands`,
`python -m bench.run`), never imported from here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from functools import partial, wraps
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, TypeVar

import click
from pydantic.fields import FieldInfo

from app.garbage import tune_garbage_collector
from app.settings import WorkerSettings
from journal import SEQ_NR_MAX
from journal.settings import (
    DEFAULT_QUARANTINE_LIMIT,
    MAX_QUARANTINE_LIMIT,
    HttpAuthSettings,
    Settings,
)
from journal.version import VERSION
from kjconfig.errors import TlsRefused
from kjconfig.settings import (
    RENAMED,
    KJSettings,
    SettingsError,
    describe_field,
    flag_of_variable,
    is_secret,
    renamed_use,
    warn_deprecated,
)
from stack.settings import StackSettings

# every command line's (pipeline/commands.py is one of its own)
CONTEXT: Mapping[str, Any] = {"max_content_width": 100, "help_option_names": ["-h", "--help"]}
_Settings = TypeVar("_Settings", bound=KJSettings)
_F = TypeVar("_F", bound=Callable[..., Any])

# Flags kept from before they were generated: `pipeline --bootstrap`.
_FLAG_ALIASES: Mapping[str, tuple[str, ...]] = {"kafka_bootstrap": ("--bootstrap",)}
# A renamed setting's old flag (kjconfig.settings.RENAMED) is a hidden option of its own, so
# `load` knows it was used and warns: its value goes to `<field><_OLD_FLAG><old variable>`.
_OLD_FLAG = "__old__"


def settings_options(model: type[KJSettings]) -> Callable[[_F], _F]:
    """One option per setting of `model` (nested models' included), named by the field;
    passwords have none (their variable or file only)."""

    def decorate(function: _F) -> _F:
        for owner, name, info in reversed(list(model.settings_fields())):
            if is_secret(info):
                continue  # secrets come from variables or files: argv shows in `ps`
            variable = owner.variable_of(name)
            option = click.option(
                owner.flag_of(name),
                *_FLAG_ALIASES.get(name, ()),
                name,
                default=None,  # not given: the variable or the default applies
                metavar=_metavar(info),
                help=f"{describe_field(info)} [env {variable}]",
            )
            function = option(function)
            for old in (old for old, new in RENAMED.items() if new == variable):
                hidden = click.option(
                    flag_of_variable(old),
                    f"{name}{_OLD_FLAG}{old.lower()}",
                    default=None,
                    hidden=True,
                )
                function = hidden(function)
        return function

    return decorate


def _with_old_flags(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with each old flag's value under its field (the new flag wins), warned."""
    moved = {key: value for key, value in values.items() if _OLD_FLAG not in key}
    for key, value in values.items():
        if _OLD_FLAG not in key or value is None:
            continue
        name, old = key.split(_OLD_FLAG, 1)
        old_flag, new_flag = flag_of_variable(old.upper()), flag_of_variable(RENAMED[old.upper()])
        warn_deprecated(renamed_use(old_flag, new_flag, moved.get(name) is not None))
        if moved.get(name) is None:
            moved[name] = value
    return moved


def _metavar(info: FieldInfo) -> str:
    kinds: dict[object, str] = {int: "INT", float: "FLOAT", Path: "PATH"}
    return kinds.get(info.annotation, "TEXT")


# the modules each optional extra of pyproject.toml brings that a command imports
_EXTRAS: Mapping[str, tuple[str, ...]] = {
    "worker": ("faust", "rocksdict", "uvloop"),
    "spark": ("pyspark",),
    "bench": ("faust", "matplotlib"),
}


def _installed(module: str) -> bool:
    # an imported one first: faust swaps its module for one without __spec__ (find_spec fails)
    return sys.modules.get(module) is not None or find_spec(module) is not None


def needs_extra(extra: str) -> Callable[[_F], _F]:
    """The command exits 1 naming `extra` when a module it brings is not installed (checked
    when the command runs, so its `--help` works without it)."""

    def decorate(function: _F) -> _F:
        @wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            missing = [module for module in _EXTRAS[extra] if not _installed(module)]
            if missing:
                raise click.ClickException(
                    f"this command needs the {extra!r} extra ({', '.join(missing)} missing): "
                    f"pip install 'kafka-journal[{extra}]'"
                )
            return function(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return decorate


def load(model: type[_Settings], values: Mapping[str, Any]) -> _Settings:
    """`model` from flags `values` (None: not given) over variables; UsageError if bad."""
    try:
        return model.from_flags(_with_old_flags(values))
    except SettingsError as error:
        raise click.UsageError(str(error)) from None


@click.group(context_settings=CONTEXT)
@click.version_option(VERSION, "--version", prog_name="kafka-journal")
def cli() -> None:
    """An event-sourcing journal on Kafka with Cassandra as the eventual store."""


# --- stack ------------------------------------------------------------------------------------


@cli.group()
def stack() -> None:
    """Run real Kafka and Cassandra locally: up | down | status."""


@stack.command()
@settings_options(StackSettings)
@click.option("--timeout", type=float, default=None, help="seconds to wait per server")
def up(timeout: float | None, **values: Any) -> int:
    """Start Kafka and Cassandra (reusing healthy ones)."""
    from app.provision import stack_up
    from stack.cli import run_stack

    return run_stack("up", load(StackSettings, values), timeout, up=stack_up)


@stack.command()
@settings_options(StackSettings)
def down(**values: Any) -> int:
    """Stop both servers (external ones are left alone)."""
    from stack.cli import run_stack

    return run_stack("down", load(StackSettings, values))


@stack.command()
@settings_options(StackSettings)
def status(**values: Any) -> int:
    """Show pid, ports, version, data dir and health of both servers."""
    from stack.cli import run_stack

    return run_stack("status", load(StackSettings, values))


# --- worker and run ---------------------------------------------------------------------------


def _worker_command(function: _F) -> _F:
    function = needs_extra("worker")(function)
    function = click.option(
        "--loglevel", default="info", show_default=True, help="the worker's log level"
    )(function)
    return settings_options(WorkerSettings)(function)


@cli.command()
@_worker_command
def worker(loglevel: str, **values: Any) -> int:
    """Run a Faust worker serving the HTTP API."""
    settings = load(WorkerSettings, values)
    from app.worker import run_worker

    tune_garbage_collector()
    return run_worker(settings, loglevel=loglevel)


@cli.command()
@_worker_command
def run(loglevel: str, **values: Any) -> int:
    """The main job: start the stack (Kafka, Cassandra) and a worker."""
    from app.provision import stack_up
    from stack import Stack

    settings = load(WorkerSettings, values)
    from app.worker import run_worker

    stack_up(Stack())
    print("Kafka and Cassandra are up; `kafka-journal stack down` stops them.", flush=True)
    tune_garbage_collector()
    return run_worker(settings, loglevel=loglevel)


@cli.command()
@settings_options(Settings)
@click.option("--json", "as_json", is_flag=True, help="one JSON object instead of the table")
@click.option(
    "--max-lag",
    type=click.IntRange(min=0),
    default=None,
    metavar="RECORDS",
    help="exit 1 when any partition lags more records than this (a probe for alerting)",
)
def lag(as_json: bool, max_lag: int | None, **values: Any) -> int:
    """Replication lag per partition: end offset - pointer - 1, and the oldest record's age."""
    settings = load(Settings, values)
    import asyncio

    from journal.replication import PartitionLag, format_lag, lag_json, replication_lag
    from journal.store import CassandraStore

    async def measure() -> list[PartitionLag]:
        store = await CassandraStore.connect(settings.cassandra_config())
        try:
            return await replication_lag(settings.kafka_access(), store, settings.topic)
        finally:
            await store.close()

    lags = asyncio.run(measure())
    print((lag_json if as_json else format_lag)(settings.topic, lags))
    behind = [lag for lag in lags if max_lag is not None and lag.records > max_lag]
    for lag in behind:
        print(
            f"kafka-journal lag: partition {lag.partition} lags {lag.records} records "
            f"(--max-lag {max_lag})",
            file=sys.stderr,
        )
    return 1 if behind else 0


# --- schema -----------------------------------------------------------------------------------


@cli.group()
def schema() -> None:
    """The store's schema in Cassandra: migrate, grow-listing."""


@schema.command("migrate")
@settings_options(Settings)
@click.option("--dry-run", is_flag=True, help="print the steps, run none")
def schema_migrate(dry_run: bool, **values: Any) -> int:
    """Bring KJ_KEYSPACE to this version's schema (creating it if missing), online: workers
    of the version before keep running through it (docs/operations.md, "Upgrading the
    schema"). Prints each step; needs a login that may create and alter tables."""
    settings = load(Settings, values)
    import asyncio

    from journal.errors import SetupMissing, StoreUnavailable
    from journal.store import SCHEMA_VERSION, migrate, open_session

    config = settings.cassandra_config()

    async def run() -> list[str]:
        cluster, session = await open_session(config)
        try:
            return await migrate(session, config.keyspace, config.replication, dry_run)
        finally:
            await asyncio.to_thread(cluster.shutdown)

    try:
        steps = asyncio.run(run())
    except (SetupMissing, StoreUnavailable) as error:
        print(f"kafka-journal schema migrate: {error}", file=sys.stderr)
        return 1
    if not steps:
        print(f"keyspace {config.keyspace}: at schema version {SCHEMA_VERSION}, nothing to do")
    for step in steps:
        print(f"{'would' if dry_run else 'done'}: {step}")
    return 0


# --- tokens -----------------------------------------------------------------------------------

# web.auth.Scope's values (not imported: --help loads no aiohttp)
_SCOPES = (
    "journal:read",
    "journal:write",
    "journal:delete",
    "journal:admin",
    "journal:subscribe",
    "journal:erase",
)


@cli.command()
@settings_options(HttpAuthSettings)
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    required=True,
    type=click.Choice(_SCOPES),
    help="a right the token grants (repeat for more)",
)
@click.option("--prefix", default=None, help="limit the token to journal ids starting with this")
@click.option(
    "--group-prefix",
    default=None,
    help="limit the token to subscription groups whose name starts with this",
)
@click.option(
    "--ttl", type=click.IntRange(min=1), default=3600, show_default=True, help="seconds it lasts"
)
def token(
    scopes: tuple[str, ...], prefix: str | None, group_prefix: str | None, ttl: int, **values: Any
) -> int:
    """Print (as the last line) a bearer token the configured key signs: the local stack's
    unless KJ_JWT_KEY or KJ_JWT_KEY_FILE says otherwise."""
    auth = load(HttpAuthSettings, values)
    from app.http_tokens import KeyUnusable, minter_of

    try:
        minted = minter_of(auth).mint(scopes, prefix=prefix, group_prefix=group_prefix, ttl_s=ttl)
    except (KeyUnusable, OSError) as error:
        raise click.UsageError(f"cannot mint a token: {error}") from None
    print(minted)
    return 0


# --- the direct client ------------------------------------------------------------------------


def _client_command(function: _F) -> _F:
    function = settings_options(Settings)(function)
    return click.argument("journal_id", metavar="ID")(function)


@cli.command()
@_client_command
@click.option("--data", help='the POST body, e.g. \'{"events": [{"seqNr": 1, "payload": 1}]}\'')
@click.option(
    "--expected-seq-nr",
    type=click.IntRange(0, SEQ_NR_MAX - 1),
    default=None,
    help="append only if this is the journal's last seqNr (0: none); overrides the body's",
)
@click.option(
    "--idempotency-key",
    default=None,
    help="makes a retry of this append safe (at the end: a fresh one by default, printed when "
    "the outcome is unknown)",
)
@click.option(
    "--ack",
    type=click.Choice(["verified", "kafka"]),
    default="verified",
    show_default=True,
    help="verified: once the log accepted the append (else exit 3); kafka: once Kafka "
    "acknowledged the record, for the journal's only writer",
)
def append(
    journal_id: str,
    data: str | None,
    expected_seq_nr: int | None,
    idempotency_key: str | None,
    ack: str,
    **values: Any,
) -> int:
    """Append events: the HTTP API's POST body, from --data or stdin (events without seqNrs:
    at the journal's end). Exits 3 on a seqNr conflict (the journal's last seqNr on stderr),
    75 when the outcome is unknown."""
    from app import client

    return client.run_client(
        "append",
        load(Settings, values),
        journal_id,
        lambda: client.append(data, expected_seq_nr, idempotency_key, ack),
    )


_SEQ_NR = click.IntRange(1, SEQ_NR_MAX)


def _consent_options(function: _F) -> _F:
    """--dry-run and --yes, of each command that changes what others rely on (app/confirm.py)."""
    function = click.option(
        "--yes", "-y", is_flag=True, help="proceed without asking (for scripts)"
    )(function)
    return click.option("--dry-run", is_flag=True, help="print what would change, change nothing")(
        function
    )


@cli.command()
@_client_command
@click.option("--from", "from_", type=_SEQ_NR, default=1, show_default=True)
@click.option("--to", type=_SEQ_NR, default=SEQ_NR_MAX, help="default: the end")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="at most this many")
def read(journal_id: str, from_: int, to: int, limit: int | None, **values: Any) -> int:
    """Print the journal's events as NDJSON."""
    from app import client

    command = partial(client.read, from_, to, limit)
    return client.run_client("read", load(Settings, values), journal_id, command)


@cli.command()
@_client_command
def state(journal_id: str, **values: Any) -> int:
    """The journal's state: its last seqNr and deleteTo."""
    from app import client

    command = partial(client.state, journal_id)
    return client.run_client("state", load(Settings, values), journal_id, command)


@cli.command(hidden=True)
@_client_command
def pointer(journal_id: str, **values: Any) -> int:
    """`state`'s former name ("pointer" is a partition's replicated offset, as in the store)."""
    click.echo("kafka-journal pointer is now `kafka-journal state`", err=True)
    from app import client

    command = partial(client.state, journal_id)
    return client.run_client("state", load(Settings, values), journal_id, command)


@cli.command()
@_client_command
@click.option("--to", type=_SEQ_NR, required=True, help="the last seqNr to delete")
def delete(journal_id: str, to: int, **values: Any) -> int:
    """Delete events up to --to (at most the last seqNr)."""
    from app import client

    return client.run_client(
        "delete", load(Settings, values), journal_id, partial(client.delete, to)
    )


@cli.command()
@_client_command
def purge(journal_id: str, **values: Any) -> int:
    """Remove the whole journal."""
    from app import client

    return client.run_client("purge", load(Settings, values), journal_id, client.purge)


@cli.command()
@settings_options(Settings)
@click.option(
    "--after",
    default=None,
    help="a position printed earlier: resume after it; or 'end': only what is appended from now",
)
@click.option("--tags", default=None, help="comma-separated: only events with any of them")
@click.option("--live/--no-live", default=False, show_default=True, help="forever, heartbeats")
@click.option(
    "--group",
    default=None,
    metavar="NAME",
    help="as a member of this subscription group: its share of the partitions, from the "
    "group's checkpoint, each event acknowledged once printed (live; not with --after)",
)
def subscribe(
    after: str | None, tags: str | None, live: bool, group: str | None, **values: Any
) -> int:
    """Every journal's accepted events as NDJSON, as GET /events: each line has its journal's
    id and the position to resume after it (--after)."""
    from app import client

    if group is not None:
        if after is not None:
            raise click.UsageError("--after and --group: a group resumes at its checkpoint")
        return client.subscribe_group(load(Settings, values), group, tags)
    return client.subscribe(load(Settings, values), after, tags, live)


@cli.group(invoke_without_command=True)
@settings_options(Settings)
@click.pass_context
def groups(context: click.Context, /, **values: Any) -> int:
    """The subscription groups of the topic: state, members, checkpoint and lag per
    partition (`groups reset` moves a checkpoint)."""
    context.obj = values
    if context.invoked_subcommand is not None:
        return 0
    from app import client

    return client.show_groups(load(Settings, values))


@groups.command("reset")
@click.argument("name")
@click.option("--to-start", is_flag=True, help="to the start of each partition's log")
@click.option(
    "--to-time",
    default=None,
    metavar="ISO-8601",
    help="to the first record at or after this time (e.g. 2026-11-26T12:00:00Z)",
)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    help="only this partition's checkpoint (repeat for more; default: every partition)",
)
@_consent_options
@click.pass_context
def groups_reset(
    context: click.Context,
    name: str,
    to_start: bool,
    to_time: str | None,
    partitions: tuple[int, ...],
    dry_run: bool,
    yes: bool,
) -> int:
    """Move group NAME's checkpoints (only while no member is active): prints each move (from
    what to what) and asks first."""
    if to_start == (to_time is not None):
        raise click.UsageError("give one of --to-start and --to-time")
    from app import client

    settings = load(Settings, context.obj)
    return client.reset_group(settings, name, to_time, partitions, dry_run, yes)


@cli.command()
@settings_options(Settings)
@click.option("--prefix", default="", help="only ids that start with it")
@click.option("--after", default=None, help="only ids above it (to resume a listing)")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="at most this many")
def journals(prefix: str, after: str | None, limit: int | None, **values: Any) -> int:
    """Print the ids of the journals that exist, one a line, in order (purged ones left out;
    as `GET /journals`, every page of it)."""
    from app import client

    return client.list_ids(load(Settings, values), prefix, after, limit)


@cli.command()
@_client_command
@click.option(
    "--accept-loss",
    "decision",
    flag_value="accept-loss",
    help="delete what the store held before the gap (it may lack lost actions); the journal "
    "continues after it",
)
@click.option("--purge", "decision", flag_value="purge", help="the journal starts again, empty")
@_consent_options
def repair(journal_id: str, decision: str | None, dry_run: bool, yes: bool, **values: Any) -> int:
    """Repair a truncated journal (410 journal_truncated: records expired from Kafka before
    replication stored them) through an action: --accept-loss (a Delete up to its last seqNr
    stored before the gap) or --purge (a Purge). Refuses (exit 1, nothing produced) unless the
    journal is truncated now; prints the action and asks first. See app/repair.py."""
    if decision is None:
        raise click.UsageError("say how: --accept-loss or --purge")
    from app.repair import run_repair

    chosen: Literal["accept-loss", "purge"] = "purge" if decision == "purge" else "accept-loss"
    return run_repair(load(Settings, values), journal_id, chosen, dry_run, yes)


@cli.command()
@_client_command
@_consent_options
def erase(journal_id: str, dry_run: bool, yes: bool, **values: Any) -> int:
    """Erase a journal for good (crypto-shredding, docs/erasure.md): it no longer reads nor
    appends, its rows are purged and its data key destroyed, so every copy of its payloads is
    unreadable. Needs the key-encryption key (KJ_KEK_FILE); run it again to finish an erasure
    that stopped part way."""
    from app.erasure import run_erase

    return run_erase(load(Settings, values), journal_id, dry_run, yes)


@cli.group()
def keys() -> None:
    """The journals' data keys (docs/erasure.md): new-kek | rotate."""


@keys.command("new-kek")
def keys_new_kek() -> int:
    """Print a fresh key-encryption key (32 bytes, base64): keep it in a file (KJ_KEK_FILE)."""
    from journal.codec import new_kek_text

    click.echo(new_kek_text())
    return 0


@keys.command("rotate")
@settings_options(Settings)
@_consent_options
def keys_rotate(dry_run: bool, yes: bool, **values: Any) -> int:
    """Rewrap every data key of the topic with the current KEK (KJ_KEK_FILE), unwrapping with
    the previous one (KJ_KEK_OLD_FILE); events are not rewritten."""
    from app.erasure import run_rotate

    return run_rotate(load(Settings, values), dry_run, yes)


# --- the topic ---------------------------------------------------------------------------------


@cli.group()
def topic() -> None:
    """The action topic: grow."""


@topic.command("grow")
@settings_options(Settings)
@_consent_options
def topic_grow(dry_run: bool, yes: bool, **values: Any) -> int:
    """Grow the action topic online into <topic>.<M> with --partitions M (docs/growing.md):
    plan, create (with KJ_SECURITY=on: its quarantine and the ACLs of the topic and its
    quarantine, mirrored), then cut each partition with a Seal. Prints the plan, the ACLs to
    create and each partition's step, then asks (--yes: does not ask; --dry-run: stops there).
    Run again with the same arguments, it resumes from the registry and the log. With
    KJ_SECURITY=on, run it as Kafka's administrator (KJ_KAFKA_USERNAME and its password) with
    a Cassandra role that writes the keyspace (KJ_CASSANDRA_USERNAME=journal_writer). Exit 1:
    refused, 75: Kafka or Cassandra did not answer (run it again)."""
    from app.grow import run_grow

    # the settings' --partitions (the count a topic is created with) is the grown count here:
    # said on the command line, never taken from KJ_PARTITIONS (options default to None)
    if values.get("partitions") is None:
        raise click.UsageError("say the grown topic's partition count: --partitions M")
    settings = load(Settings, values)
    return run_grow(settings, settings.partitions, dry_run, yes)


@schema.command("grow-listing")
@settings_options(Settings)
@click.option(
    "--buckets",
    type=click.IntRange(1),
    required=True,
    help="the listing's new bucket count: at least twice the current one",
)
@_consent_options
def schema_grow_listing(buckets: int, dry_run: bool, yes: bool, **values: Any) -> int:
    """Grow the listing of --topic T (`journal_ids`) to --buckets N online (docs/operations.md,
    "Growing the listing"): plan (processes write both generations), copy bucket by bucket,
    switch, stop writing the old one, drop its rows. Prints the record and the next step,
    then asks (--yes: does not ask; --dry-run: stops there). Run again with the same
    arguments, it resumes. Exit 1: refused, 75: Cassandra did not answer (run it again)."""
    from app.grow_listing import run_grow_listing

    # the topic is said on the command line, never taken from KJ_TOPIC's default
    if values.get("topic") is None:
        raise click.UsageError("say the topic whose listing grows: --topic T")
    settings = load(Settings, values)
    return run_grow_listing(settings, settings.topic, buckets, dry_run, yes)


# --- quarantine -------------------------------------------------------------------------------


@cli.group()
def quarantine() -> None:
    """The records replication set aside: list | replay."""


@quarantine.command("list")
@settings_options(Settings)
@click.option("--json", "as_json", is_flag=True, help="one JSON object a line")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_QUARANTINE_LIMIT),
    default=DEFAULT_QUARANTINE_LIMIT,
    show_default=True,
    help="the newest this many records (only the last this many a partition are read)",
)
def quarantine_list(as_json: bool, limit: int, **values: Any) -> int:
    """The newest quarantined records, oldest of them first: where each is, where it came from,
    why, when, replayed or not; and how many the quarantine holds."""
    from app.quarantine import run_list

    return run_list(load(Settings, values), as_json, limit)


@quarantine.command("replay")
@settings_options(Settings)
@click.argument("positions", metavar="[POSITION]...", nargs=-1)
@click.option("--all", "every", is_flag=True, help="every quarantined record, not named ones")
@_consent_options
def quarantine_replay(
    positions: tuple[str, ...], every: bool, dry_run: bool, yes: bool, **values: Any
) -> int:
    """Produce the quarantined records named (POSITION: partition:offset, as `quarantine list`
    shows) or --all that now decode to the action topic again, in order; a replayed record is
    folded at its new offset (an Append that no longer continues its journal is rejected
    there). The others stay. Prints what it will do and asks first."""
    if bool(positions) == every:
        raise click.UsageError("name the records to replay (POSITION...) or give --all")
    from app.quarantine import run_replay

    return run_replay(load(Settings, values), positions, dry_run, yes)


# --- pipeline ---------------------------------------------------------------------------------


@cli.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def pipeline(arguments: tuple[str, ...]) -> int:
    """Batch jobs on Spark: rebuild | audit | export | import."""
    # pipeline stands above app (its jobs use app's command line helpers): it runs as its own
    # program (pipeline/commands.py), never imported from here
    command = [sys.executable, "-m", "pipeline.commands", *arguments]
    return subprocess.run(command, check=False).returncode


# --- bench ------------------------------------------------------------------------------------


@cli.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@needs_extra("bench")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def bench(arguments: tuple[str, ...]) -> int:
    """Measure against raw baselines and write BENCHMARKS.md (+ PNG plots) under --out (.);
    --quick, or one scenario with --X-only (`kafka-journal bench --help` lists them)."""
    # bench stands above app (it drives workers and signs requests with app's code): it runs
    # as its own program, never imported from here; its options are its own (bench/run.py),
    # passed through, so a scenario added there needs nothing here. A later --out wins.
    command = [sys.executable, "-m", "bench.run", "--out", str(Path.cwd()), *arguments]
    return subprocess.run(command, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    """Run the command line on `argv` (default: the process's); the exit code."""
    return run_group(cli, "kafka-journal", argv)


def run_group(group: click.Group, prog_name: str, argv: list[str] | None = None) -> int:
    """Run the commands of `group` on `argv` (default: the process's); the exit code."""
    try:
        result = group.main(
            args=sys.argv[1:] if argv is None else argv,
            prog_name=prog_name,
            standalone_mode=False,
        )
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        print("Aborted!", file=sys.stderr)
        return 1
    except TlsRefused as error:  # a certificate problem, the operator's: the reason, no trace
        print(f"{prog_name}: {error}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
