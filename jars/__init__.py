"""Jars from Maven Central, resolved once into a local cache: the servers' of `stack` and
Spark's Kafka source of `pipeline`. Imports nothing of the project, so both can use it.

Contract: `resolve_pom(pom, directory)` returns the runtime jars of `pom`. The first call runs
`mvn dependency:copy-dependencies` into `directory`; a marker file written last (holding the
pom's hash) says the directory is complete, so later calls read the directory and never run
Maven or touch the network. An edited pom (same version, new hash) is resolved again.
Concurrent callers (two test sessions) serialise on a lock file. `MavenFailed` when Maven is
missing or fails. `cache_root` is where the project keeps them; `Progress` is where long
steps report, a line at a time.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

MARKER = ".complete"

# a progress line's sink: any callable taking one line of text
Progress = Callable[[str], None]


def no_progress(line: str) -> None:
    """Discards the line; for callers that only want the result."""
    del line


class MavenFailed(RuntimeError):
    """Maven is missing or could not resolve a pom."""


def cache_root(environ: Mapping[str, str]) -> Path:
    """`KJ_JAR_CACHE`, else $XDG_CACHE_HOME (or ~/.cache)/kafka-journal/jars."""
    explicit = environ.get("KJ_JAR_CACHE")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(base) / "kafka-journal" / "jars").expanduser().resolve()


def resolve_pom(
    pom: Path, directory: Path, progress: Progress = no_progress, mvn: str = "mvn"
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
        raise MavenFailed(f"'{mvn}' not found: Maven is needed once to fetch the {name} jars")
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
        raise MavenFailed(f"mvn failed resolving the {name} jars:\n{output}")
    jars = sorted(scratch.glob("*.jar"))
    if not jars:
        raise MavenFailed(f"mvn resolved no jars for {name} into {scratch}")
    shutil.rmtree(directory, ignore_errors=True)
    scratch.rename(directory)
    (directory / MARKER).write_text(pom_hash + "\n", encoding="utf-8")
    progress(f"{name}: {len(jars)} jars cached in {time.monotonic() - started:.0f} s")
    return sorted(directory.glob("*.jar"))
