"""README.md, as a newcomer uses it: its "Try it" commands answer 2xx against a real worker, its
route table gives every route its scope, and its links lead to files of the repository."""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from stack import Stack
from tests.support.harness import settings_for, unique
from tests.support.workers import WorkerProcess
from web.routes import ROUTES

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
TRY_IT_ADDRESS = "localhost:6066"  # where the README's commands expect `make run`'s worker


def section(title: str) -> str:
    """The lines under the heading `title` up to the next heading of its level or above (a
    shell comment inside a code block is no heading)."""
    level = title.index(" ")
    lines = README.splitlines()
    start = lines.index(title)
    in_code = False
    for end in range(start + 1, len(lines)):
        in_code ^= lines[end].startswith("```")
        heading = re.match(r"#+ ", lines[end])
        if not in_code and heading and heading.end() - 1 <= level:
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def try_it_commands() -> list[list[str]]:
    """The curl commands of the "Try it" section's shell blocks, in order, as argv."""
    text = section("## Try it")
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            if line.strip().startswith("curl "):
                commands.append(shlex.split(line))
    return commands


def test_the_route_table_gives_every_route_its_scope() -> None:
    # method | path | scope, or an en dash (U+2013) for none
    row = r"^\| `(\w+)` \| `([^`]+)` \| (?:`([^`]+)`|\u2013) \|"
    rows = re.findall(row, section("### The routes"), re.MULTILINE)
    documented = {(method, path): scope or None for method, path, scope in rows}
    served = {(route.method, route.path): route.scope for route in ROUTES}
    assert documented == served
    assert len(rows) == len(documented), "a route is listed twice"


def test_every_relative_link_leads_to_a_file_of_the_repository() -> None:
    targets = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [t.partition("#")[0] for t in targets if not re.match(r"https?://", t)]
    assert local, "the README links to files of the repository"
    for target in local:
        path = (REPO / target).resolve()
        assert path.is_relative_to(REPO) and path.exists(), target


def test_the_try_it_block_has_the_commands_it_describes() -> None:
    commands = try_it_commands()
    methods = [next((a[2:] for a in c if a.startswith("-X")), "GET") for c in commands]
    assert methods.count("POST") == 2 and methods.count("DELETE") == 3, methods
    assert all(any(TRY_IT_ADDRESS in arg for arg in command) for command in commands)


def answer_of(command: list[str], address: str) -> tuple[int, str]:
    """Run a README command against `address`: its HTTP status and body."""
    argv = [arg.replace(TRY_IT_ADDRESS, address) for arg in command]
    argv += ["--max-time", "60", "-w", "\n%{http_code}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, (argv, done.stderr)
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


@pytest.mark.integration
async def test_the_try_it_commands_answer_2xx_top_to_bottom(stack: Stack, tmp_path: Path) -> None:
    settings = settings_for(stack, unique("journal_readme"), unique("kj_readme"))
    worker = WorkerProcess(settings, unique("app"), tmp_path / "data")
    worker.start()
    try:
        await worker.wait_ready()
        address = f"{worker.url.host}:{worker.url.port}"
        for command in try_it_commands():
            status, body = await asyncio.to_thread(answer_of, command, address)
            assert 200 <= status < 300, (shlex.join(command), status, body)
    finally:
        worker.stop()
