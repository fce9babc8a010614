"""A server's classpath: its jars from Maven Central, resolved once into a local cache.

Contract: `classpath(server, cache_root)` returns the jar paths of `server` ("kafka" or
"cassandra") as pinned by `stack/maven/<server>.pom.xml`. The first call runs
`mvn dependency:copy-dependencies` into `<cache_root>/<server>-<version>/`; a marker file
written last (holding the pom's hash) says the directory is complete, so later calls read the
directory and never run Maven or touch the network. An edited pom (same version, new hash) is
resolved again. Concurrent callers (two test sessions) serialise on a lock file.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import subprocess
import time
from pathlib import Path

from stack.errors import StackError
from stack.progress import Progress, print_progress

POM_DIR = Path(__file__).resolve().parent / "maven"
SERVERS = ("kafka", "cassandra")
MARKER = ".complete"


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
    return resolve_pom(pom_path(server), cache_dir(server, cache_root), progress, mvn)


def resolve_pom(
    pom: Path, directory: Path, progress: Progress = print_progress, mvn: str = "mvn"
) -> list[Path]:
    """The runtime jars of any pom, cached in `directory` as the module contract says."""
    pom_hash = hashlib.sha256(pom.read_bytes()).hexdigest()
    jars = _cached(directory, pom_hash)
    if jars is not None:
        return jars
    directory.parent.mkdir(parents=True, exist_ok=True)
    with (directory.parent / f".{directory.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        jars = _cached(directory, pom_hash)  # another process may have finished meanwhile
        if jars is not None:
            return jars
        return _resolve(pom, directory, pom_hash, progress, mvn)


def _cached(directory: Path, pom_hash: str) -> list[Path] | None:
    marker = directory / MARKER
    if not marker.is_file() or marker.read_text(encoding="utf-8").strip() != pom_hash:
        return None
    jars = sorted(directory.glob("*.jar"))
    return jars or None


def _resolve(pom: Path, directory: Path, pom_hash: str, progress: Progress, mvn: str) -> list[Path]:
    name = directory.name
    if shutil.which(mvn) is None:
        raise StackError(f"'{mvn}' not found: Maven is needed once to fetch the {name} jars")
    # Resolve into a scratch dir and rename it, so a crash never leaves a half-filled cache.
    scratch = directory.with_name(directory.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    progress(f"{name}: resolving jars from Maven Central into {directory} (once)")
    started = time.monotonic()
    command = [
        mvn, "-q", "-B", "-f", str(pom),
        "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={scratch}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        output = (done.stdout + done.stderr).strip()[-3000:]
        raise StackError(f"mvn failed resolving the {name} jars:\n{output}")
    jars = sorted(scratch.glob("*.jar"))
    if not jars:
        raise StackError(f"mvn resolved no jars for {name} into {scratch}")
    shutil.rmtree(directory, ignore_errors=True)
    scratch.rename(directory)
    (directory / MARKER).write_text(pom_hash + "\n", encoding="utf-8")
    progress(f"{name}: {len(jars)} jars cached in {time.monotonic() - started:.0f} s")
    return sorted(directory.glob("*.jar"))


def classpath_arg(jars: list[Path]) -> str:
    """The `-cp` value: a directory wildcard would also pick up stray jars, so list them."""
    return ":".join(str(jar) for jar in jars)
