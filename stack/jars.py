"""A server's classpath: its jars from Maven Central, resolved once into a local cache.

Contract: `classpath(server, cache_root)` returns the jar paths of `server` ("kafka" or
"cassandra") as pinned by `stack/maven/<server>.pom.xml`, resolved by `jars.resolve_pom` into
`<cache_root>/<server>-<version>/` (Maven runs once; later calls read the cache).
"""

from __future__ import annotations

import re
from pathlib import Path

from jars import MavenFailed, resolve_pom
from stack.errors import StackError
from stack.progress import Progress, print_progress

POM_DIR = Path(__file__).resolve().parent / "maven"
SERVERS = ("kafka", "cassandra")


def pom_path(server: str) -> Path:
    if server not in SERVERS:
        raise ValueError(f"unknown server {server!r}; expected one of {SERVERS}")
    return POM_DIR / f"{server}.pom.xml"


def pom_version(server: str) -> str:
    """The version the pom pins, from its `<kafka.version>` / `<cassandra.version>` property."""
    text = pom_path(server).read_text(encoding="utf-8")
    match = re.search(rf"<{server}\.version>\s*([^<\s]+)\s*</{server}\.version>", text)
    if match is None:
        raise StackError(f"{pom_path(server)} has no <{server}.version> property")
    return match.group(1)


def cache_dir(server: str, cache_root: Path) -> Path:
    """Keyed by server and version, so two versions can sit side by side."""
    return cache_root / f"{server}-{pom_version(server)}"


def classpath(
    server: str, cache_root: Path, progress: Progress = print_progress, mvn: str = "mvn"
) -> list[Path]:
    """The server's jars, resolving them with Maven the first time (see the module contract)."""
    try:
        return resolve_pom(pom_path(server), cache_dir(server, cache_root), progress, mvn)
    except MavenFailed as error:
        raise StackError(str(error)) from error


def classpath_arg(jars: list[Path]) -> str:
    """The `-cp` value: a directory wildcard would also pick up stray jars, so list them."""
    return ":".join(str(jar) for jar in jars)
