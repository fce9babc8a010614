"""The command line: `kafka-journal run`, the main job, ends with a worker answering."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import orjson
import pytest
from cassandra.cluster import Cluster
from click.testing import CliRunner

from app.cli import cli, main
from app.settings import WorkerSettings
from journal.settings import Settings
from journal.store import SCHEMA_VERSION, CassandraStore
from journal.version import VERSION
from kjconfig.settings import KJSettings, is_secret
from pipeline.commands import pipeline
from stack import Stack, StackSettings
from tests.journal.journal_contract import events
from tests.support.harness import harness, settings_for, unique
from tests.support.http_api import HttpJournals, client_session
from tests.support.workers import WorkerProcess


@pytest.mark.integration
async def test_run_starts_a_worker_that_answers_and_says_how(stack: Stack, tmp_path: Path) -> None:
    settings = settings_for(stack, unique("journal_run"), unique("kj_run"))
    run = WorkerProcess(settings, unique("app"), tmp_path / "data", command="run")
    run.start()
    try:
        await run.wait_ready()
        async with client_session(settings) as session:
            api = HttpJournals(session, [run.url])
            await api.append("hello", events(1, 2))
            assert await api.read("hello") == events(1, 2)
        assert f"Kafka Journal is serving {run.url}" in run.log.read_text()
        assert "curl -s -XPOST" in run.log.read_text()
    finally:
        run.stop()


def help_of(*command: str, group: click.Group = cli) -> str:
    result = CliRunner().invoke(group, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_help_lists_every_command() -> None:
    out = help_of()
    commands = ("stack", "worker", "run", "append", "read", "state", "delete", "purge")
    for command in (*commands, "subscribe", "journals", "schema"):
        assert f"  {command} " in out, command
    for command in ("pipeline", "bench"):
        assert command in out


@pytest.mark.parametrize(
    ("group", "command", "model"),
    [
        (cli, ("worker",), WorkerSettings),
        (cli, ("run",), WorkerSettings),
        (cli, ("append",), Settings),
        (cli, ("read",), Settings),
        (pipeline, ("audit",), Settings),  # `kafka-journal pipeline`'s own program
        (cli, ("stack", "up"), StackSettings),
    ],
)
def test_help_shows_each_setting_with_its_flag_and_variable(
    group: click.Group, command: tuple[str, ...], model: type[KJSettings]
) -> None:
    # one entry per option: from the line starting with its flags to the next such line
    text = help_of(*command, group=group)
    entries = [" ".join(entry.split()) for entry in re.split(r"\n  (?=-)", text)[1:]]
    fields = [field for field in model.settings_fields() if not is_secret(field[2])]
    secrets = {o.flag_of(n) for o, n, info in model.settings_fields() if is_secret(info)}
    assert not [entry for entry in entries if entry.split()[0].rstrip(",") in secrets]
    for owner, name, _info in fields:
        flag, variable = owner.flag_of(name), owner.variable_of(name)
        assert any(entry.startswith(flag) and f"[env {variable}]" in entry for entry in entries), (
            flag,
            variable,
        )
    assert sum("[env KJ_" in entry for entry in entries) == len(fields)


def test_pipeline_runs_its_own_program(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "audit", "--help"]) == 0
    assert "Usage: kafka-journal pipeline audit [OPTIONS]" in capfd.readouterr().out
    assert main(["pipeline", "rebuild", "--from", "nowhere"]) == 2


def test_a_bad_variable_is_named_and_exits_2() -> None:
    result = CliRunner().invoke(cli, ["worker"], env={"KJ_WEB_PORT": "http"})
    assert result.exit_code == 2
    assert "KJ_WEB_PORT='http'" in result.output


def test_a_bad_flag_is_named_and_exits_2() -> None:
    assert main(["stack", "status", "--kafka-heap", "lots"]) == 2


def test_a_bad_append_body_is_refused_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    # no server is reachable at this bootstrap: the body's error must come first
    argv = [
        "append",
        "j",
        "--kafka-bootstrap",
        "127.0.0.1:1",
        "--data",
        '{"events": [{"seqNr": 0}]}',
    ]
    assert main(argv) == 2
    assert "invalid_seq_nr" in capsys.readouterr().err


def test_seq_nrs_out_of_range_are_refused() -> None:
    result = CliRunner().invoke(cli, ["read", "j", "--from", "0"])
    assert result.exit_code == 2
    assert "--from" in result.output


def server_flags(settings: Settings) -> list[str]:
    """The flags that point a command at the settings' servers, topic and keyspace."""
    return [
        f"--kafka-bootstrap={settings.kafka_bootstrap}",
        f"--cassandra-hosts={settings.cassandra_hosts}",
        f"--cassandra-port={settings.cassandra_port}",
        f"--topic={settings.topic}",
        f"--keyspace={settings.keyspace}",
    ]


@pytest.mark.integration
async def test_schema_migrate_says_its_steps_and_a_dry_run_runs_none(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for(stack, unique("journal_schema"), unique("kj_schema"))
    flags = ["schema", "migrate", *server_flags(settings)]

    def migrate(*more: str) -> list[str]:
        code = main([*flags, *more])
        out, err = capsys.readouterr()
        assert code == 0, err
        return out.splitlines()

    def cql(query: str) -> list[Any]:
        cluster = Cluster(list(stack.cassandra_hosts), port=stack.cassandra_port)
        try:  # a schema change waits for the nodes' agreement: longer on a busy host
            return list(cluster.connect().execute(query, timeout=120))
        finally:
            cluster.shutdown()

    def keyspaces() -> set[str]:
        rows = cql("SELECT keyspace_name FROM system_schema.keyspaces")
        return {row.keyspace_name for row in rows}

    planned = await asyncio.to_thread(migrate, "--dry-run")
    assert planned[0] == f"would: create keyspace {settings.keyspace}"
    assert planned[-1] == f"would: schema version None -> {SCHEMA_VERSION}"
    assert settings.keyspace not in await asyncio.to_thread(keyspaces)
    done = await asyncio.to_thread(migrate)
    assert done == [line.replace("would: ", "done: ", 1) for line in planned]
    assert await asyncio.to_thread(migrate) == [
        f"keyspace {settings.keyspace}: at schema version {SCHEMA_VERSION}, nothing to do"
    ]
    store = await CassandraStore.connect(replace(settings.cassandra_config(), create_schema=False))
    await store.close()  # the schema a process that may not create one checks
    await asyncio.to_thread(cql, f"DROP KEYSPACE {settings.keyspace}")


@pytest.mark.integration
async def test_lag_prints_each_partitions_unreplicated_records(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(stack, unique("kj_lag"), "journal_lag") as connected:
        settings = connected.settings
        journal = connected.journals.journal("behind")
        for n in range(1, 4):
            await journal.append(events(n, n))
        partition = connected.journals.writer.partition_of(journal.key)
        flags = ["lag", *server_flags(settings)]

        def rows() -> dict[int, list[str]]:
            assert main(flags) == 0
            lines = capsys.readouterr().out.splitlines()
            return {int(c[0]): c for line in lines if (c := line.split())[0].isdigit()}

        behind = await asyncio.to_thread(rows)
        assert behind[partition][1:4] == ["3", "-1", "3"]  # end, pointer, lag
        assert behind[partition][5:] == ["s", "ago"]
        await connected.replicate()
        caught_up = await asyncio.to_thread(rows)
        assert caught_up[partition][1:5] == ["3", "2", "0", "-"]


@pytest.mark.integration
async def test_lag_as_json_and_its_bound_on_records(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(stack, unique("kj_lag_json"), "journal_lag_json") as connected:
        settings = connected.settings
        journal = connected.journals.journal("behind")
        for n in range(1, 4):
            await journal.append(events(n, n))
        partition = connected.journals.writer.partition_of(journal.key)

        def lag(*flags: str) -> tuple[int, dict[str, Any], str]:
            code = main(["lag", "--json", *flags, *server_flags(settings)])
            out, err = capsys.readouterr()
            return code, orjson.loads(out), err

        code, report, _ = await asyncio.to_thread(lag)
        assert code == 0
        assert report["topic"] == settings.topic
        assert report["lagRecords"] == 3
        behind = next(p for p in report["partitions"] if p["partition"] == partition)
        assert (behind["endOffset"], behind["pointer"], behind["lagRecords"]) == (3, -1, 3)
        assert behind["lagSeconds"] >= 0
        assert (await asyncio.to_thread(lag, "--max-lag", "3"))[0] == 0
        code, _, err = await asyncio.to_thread(lag, "--max-lag", "2")
        assert code == 1
        assert f"partition {partition} lags 3 records" in err
        await connected.replicate()
        code, report, _ = await asyncio.to_thread(lag, "--max-lag", "0")
        assert code == 0
        assert report["lagRecords"] == 0


def test_version_is_the_journals(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"kafka-journal, version {VERSION}\n"


def test_a_bad_subscription_position_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["subscribe", "--kafka-bootstrap", "127.0.0.1:1", "--after", "%%"]) == 2
    assert "invalid_query" in capsys.readouterr().err


@pytest.mark.integration
async def test_subscribe_prints_events_and_resumes_after_a_position(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(stack, unique("kj_sub_cli"), "journal_sub_cli") as connected:
        settings = connected.settings
        await connected.journals.journal("a").append(events(1, 2))
        await connected.journals.journal("b").append(events(1, 1))
        flags = ["subscribe", *server_flags(settings)]

        def lines(*more: str) -> list[dict[str, object]]:
            assert main([*flags, *more]) == 0
            return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]

        first = await asyncio.to_thread(lines)
        got = sorted((line["id"], line["seqNr"]) for line in first if "id" in line)
        assert got == [("a", 1), ("a", 2), ("b", 1)]
        last = first[-1]
        assert last["heartbeat"] is True
        assert await asyncio.to_thread(lines, f"--after={last['position']}") == [last]
        # from the end: nothing of what the topic held, only its position
        assert await asyncio.to_thread(lines, "--after=end") == [last]


@pytest.mark.integration
async def test_journals_prints_the_ids_of_a_prefix_page_after_page(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(stack, unique("kj_ids_cli"), "journal_ids_cli") as connected:
        settings = connected.settings
        for journal_id in ("a", "p-1", "p-2", "p-3", "p-4"):
            await connected.journals.journal(journal_id).append(events(1, 1))
        await connected.journals.journal("p-2").purge()
        flags = [
            "journals",
            *server_flags(settings),
            "--prefix=p-",
        ]

        def lines(*more: str) -> list[str]:
            assert main([*flags, *more]) == 0
            return capsys.readouterr().out.splitlines()

        assert await asyncio.to_thread(lines) == ["p-1", "p-3", "p-4"]
        assert await asyncio.to_thread(lines, "--limit=2") == ["p-1", "p-3"]
        assert await asyncio.to_thread(lines, "--after=p-3") == ["p-4"]
