"""docker-compose.yml and the Dockerfile have the structure the stack promises, and run the
same server versions as the jars (read from stack/maven/*.pom.xml, never written twice).

PyYAML is not a dependency, so a small reader for the YAML subset the compose file uses
(block mappings and sequences, plain/quoted scalars, JSON-style flow lists) parses it. It
rejects anything else (anchors, multi-line strings, flow mappings, trailing comments) rather
than misreading it: a compose file that outgrows the subset fails this test loudly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stack.jars import pom_version

REPO = Path(__file__).resolve().parents[2]

_Line = tuple[int, str, int]  # indent, text, line number


class UnsupportedYaml(ValueError):
    pass


def _scalar(text: str, number: int) -> Any:
    if text.startswith(("&", "*", "|", ">", "{", "!")) or (" #" in text and text[0] not in "\"'["):
        raise UnsupportedYaml(f"line {number}: unsupported YAML: {text!r}")
    if text.startswith(('"', "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise UnsupportedYaml(f"line {number}: {error}: {text!r}") from error
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise UnsupportedYaml(f"line {number}: unterminated string {text!r}")
        return text[1:-1].replace("''", "'")
    return text


def _block(lines: list[_Line], i: int, indent: int) -> tuple[Any, int]:
    if lines[i][1].startswith("- ") or lines[i][1] == "-":
        return _sequence(lines, i, indent)
    return _mapping(lines, i, indent)


def _sequence(lines: list[_Line], i: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
        text, number = lines[i][1][2:].strip(), lines[i][2]
        if re.match(r"^[\w.-]+:( |$)", text):
            raise UnsupportedYaml(f"line {number}: mappings inside sequences are not supported")
        items.append(_scalar(text, number))
        i += 1
    return items, i


def _mapping(lines: list[_Line], i: int, indent: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent:
        _indent, text, number = lines[i]
        match = re.match(r"^([\w.-]+):(?: (.*))?$", text)
        if match is None:
            raise UnsupportedYaml(f"line {number}: expected 'key: value', got {text!r}")
        key, rest = match.group(1), (match.group(2) or "").strip()
        if key in result:
            raise UnsupportedYaml(f"line {number}: duplicate key {key!r}")
        i += 1
        if rest:
            result[key] = _scalar(rest, number)
        elif i < len(lines) and lines[i][0] > indent:
            result[key], i = _block(lines, i, lines[i][0])
        else:
            result[key] = None
    if i < len(lines) and lines[i][0] > indent:
        raise UnsupportedYaml(f"line {lines[i][2]}: unexpected indentation")
    return result, i


def parse_yaml_subset(text: str) -> Any:
    lines: list[_Line] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise UnsupportedYaml(f"line {number}: tab indentation")
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            lines.append((len(raw) - len(raw.lstrip(" ")), stripped, number))
    if not lines:
        return None
    value, end = _block(lines, 0, lines[0][0])
    if end != len(lines):
        raise UnsupportedYaml(f"line {lines[end][2]}: unexpected dedent or content")
    return value


def test_the_subset_reader_reads_what_it_supports_and_rejects_the_rest() -> None:
    parsed = parse_yaml_subset(
        'a:\n  b: "x:y"\n  c:\n    - 1\n    - \'it\'\'s\'\n  d: ["CMD", "x"]\n  e:\n'
    )
    assert parsed == {"a": {"b": "x:y", "c": ["1", "it's"], "d": ["CMD", "x"], "e": None}}
    for bad in ("a: &anchor 1\n", "a: |\n  text\n", "a: {b: 1}\n", "a: 1 # note\n", "a:\n- b: 1\n"):
        with pytest.raises(UnsupportedYaml):
            parse_yaml_subset(bad)


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = parse_yaml_subset((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    assert isinstance(compose, dict)
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def test_compose_has_kafka_cassandra_and_a_worker(services: dict[str, Any]) -> None:
    assert set(services) == {"kafka", "cassandra", "worker"}


def test_compose_images_are_the_versions_the_poms_pin(services: dict[str, Any]) -> None:
    assert services["kafka"]["image"] == f"apache/kafka:{pom_version('kafka')}"
    assert services["cassandra"]["image"] == f"cassandra:{pom_version('cassandra')}"


def test_kafka_is_a_single_kraft_node(services: dict[str, Any]) -> None:
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{env['KAFKA_NODE_ID']}@")
    for factor in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert env[factor] == "1"
    assert "9092:9092" in services["kafka"]["ports"]
    assert "9042:9042" in services["cassandra"]["ports"]


def test_worker_runs_the_journal_worker_against_both_servers(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert worker["build"] == "."
    assert worker["command"] == ["kafka-journal", "worker"]
    env = worker["environment"]
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"//{env['KJ_KAFKA_BOOTSTRAP']}" in advertised, "worker must use an advertised listener"
    assert env["KJ_CASSANDRA_HOSTS"].split(":")[0] == "cassandra"
    assert set(worker["depends_on"]) == {"kafka", "cassandra"}
    assert all(d["condition"] == "service_healthy" for d in worker["depends_on"].values())


def test_dockerfile_installs_the_project_on_python_311_and_runs_the_worker() -> None:
    lines = [
        line.strip()
        for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0] == "FROM python:3.11-slim"
    install = r"RUN pip install (--no-cache-dir )?-c constraints\.txt '\.\[worker\]'"
    assert any(re.fullmatch(install, line) for line in lines)
    assert lines[-1] == 'CMD ["kafka-journal", "worker"]'
