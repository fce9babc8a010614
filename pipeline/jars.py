"""Spark's Kafka source: its jars from Maven Central, resolved once into a local cache.

Contract: `kafka_source_jars(cache_root)` returns the jar paths that `spark-kafka.pom.xml`
pins (the connector and what it needs beyond PySpark's own jars). The first call runs
`mvn dependency:copy-dependencies` into `<cache_root>/spark-kafka-<version>/`; a marker file
written last (holding the pom's hash) says the directory is complete, so later calls never run
Maven or touch the network. Concurrent callers serialise on a lock file. The same scheme as
`stack.jars`, for a pom that lives here.

Why 4.2.0 and not the installed PySpark's 4.3.0: Maven Central has no
`spark-sql-kafka-0-10_2.13:4.3.0` (nor `spark-token-provider-kafka-0-10_2.13` after 4.0.0).
The 4.2.0 connector with the 4.0.0 token provider runs batch reads on Spark 4.3.0; the
pipeline's integration tests prove it. Move both to the PySpark version once it is published.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import subprocess
import time
from pathlib import Path

from stack.progress import Progress, no_progress
from stack.settings import StackSettings

POM = Path(__file__).resolve().parent / "spark-kafka.pom.xml"
MARKER = ".complete"


class JarsUnavailable(RuntimeError):
    """Maven is missing or could not resolve the connector."""


def pom_version(pom: Path = POM) -> str:
    """The connector version the pom pins (its `<spark-kafka.version>` property)."""
    match = re.search(
        r"<spark-kafka\.version>\s*([^<\s]+)\s*</spark-kafka\.version>",
        pom.read_text(encoding="utf-8"),
    )
    if match is None:
        raise JarsUnavailable(f"{pom} has no <spark-kafka.version> property")
    return match.group(1)


def default_cache_root() -> Path:
    """The stack's jar cache (`KJ_JAR_CACHE`, default ~/.cache/kafka-journal/jars)."""
    return StackSettings.from_env().jar_cache


def kafka_source_jars(
    cache_root: Path | None = None,
    progress: Progress = no_progress,
    mvn: str = "mvn",
    pom: Path = POM,
) -> list[Path]:
    """The connector's jars, resolving them with Maven the first time (see the contract)."""
    root = default_cache_root() if cache_root is None else cache_root
    directory = root / f"spark-kafka-{pom_version(pom)}"
    pom_hash = hashlib.sha256(pom.read_bytes()).hexdigest()
    jars = _cached(directory, pom_hash)
    if jars is not None:
        return jars
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{directory.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        jars = _cached(directory, pom_hash)  # another process may have finished meanwhile
        if jars is not None:
            return jars
        return _resolve(pom, directory, pom_hash, progress, mvn)


def _cached(directory: Path, pom_hash: str) -> list[Path] | None:
    marker = directory / MARKER
    if not marker.is_file() or marker.read_text(encoding="utf-8").strip() != pom_hash:
        return None
    return sorted(directory.glob("*.jar")) or None


def _resolve(pom: Path, directory: Path, pom_hash: str, progress: Progress, mvn: str) -> list[Path]:
    if shutil.which(mvn) is None:
        raise JarsUnavailable(
            f"'{mvn}' not found: Maven is needed once to fetch Spark's Kafka source"
        )
    scratch = directory.with_name(directory.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    progress(f"resolving Spark's Kafka source from Maven Central into {directory} (once)")
    started = time.monotonic()
    command = [
        mvn, "-q", "-B", "-f", str(pom),
        "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={scratch}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    jars = sorted(scratch.glob("*.jar"))
    if done.returncode != 0 or not jars:
        shutil.rmtree(scratch, ignore_errors=True)
        output = (done.stdout + done.stderr).strip()[-3000:]
        raise JarsUnavailable(f"mvn could not resolve Spark's Kafka source:\n{output}")
    shutil.rmtree(directory, ignore_errors=True)
    scratch.rename(directory)
    (directory / MARKER).write_text(pom_hash + "\n", encoding="utf-8")
    progress(f"{len(jars)} jars cached in {time.monotonic() - started:.0f} s")
    return sorted(directory.glob("*.jar"))
