"""Spark's Kafka source: its jars from Maven Central, resolved once into a local cache.

Contract: `kafka_source_jars(cache_root)` returns the jar paths that `spark-kafka.pom.xml`
pins (the connector and what it needs beyond PySpark's own jars). The first call runs
`mvn dependency:copy-dependencies` into `<cache_root>/spark-kafka-<version>/`; a marker file
written last (holding the pom's hash) says the directory is complete, so later calls never run
Maven or touch the network. Concurrent callers serialise on a lock file. `jars.resolve_pom`
does all that, as for the stack's servers' own jars.

Why 4.2.0 and not the installed PySpark's 4.3.0: Maven Central has no
`spark-sql-kafka-0-10_2.13:4.3.0` (nor `spark-token-provider-kafka-0-10_2.13` after 4.0.0).
The 4.2.0 connector with the 4.0.0 token provider runs batch reads on Spark 4.3.0; the
pipeline's integration tests prove it. Move both to the PySpark version once it is published.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from jars import MavenFailed, Progress, cache_root, no_progress, resolve_pom

POM = Path(__file__).resolve().parent / "spark-kafka.pom.xml"


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
    return cache_root(os.environ)


def kafka_source_jars(
    cache_root: Path | None = None,
    progress: Progress = no_progress,
    mvn: str = "mvn",
    pom: Path = POM,
) -> list[Path]:
    """The connector's jars, resolving them with Maven the first time (see the contract)."""
    root = default_cache_root() if cache_root is None else cache_root
    try:
        return resolve_pom(pom, root / f"spark-kafka-{pom_version(pom)}", progress, mvn)
    except MavenFailed as error:
        raise JarsUnavailable(f"Spark's Kafka source: {error}") from error
