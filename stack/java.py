"""Finding a Java runtime both servers accept.

Contract: `find_java(requested, accepted)` returns the path of a `java` whose major version is in
`accepted`, or raises `StackError` saying what was found. Kafka 4.x needs Java 17+ and Cassandra
5.0 refuses anything but 11 and 17, so the stack asks for 17. A requested executable (KJ_JAVA)
is used only if its version fits: starting Cassandra on Java 21 fails late and obscurely.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Collection
from pathlib import Path

from stack.errors import StackError

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


@functools.cache
def java_major_version(java: str) -> int | None:
    """The major version `java -version` reports (8 for "1.8.0_x"), None if it does not run."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(done.stderr + done.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _candidates() -> list[str]:
    found: list[str] = []
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        found.append(str(Path(java_home) / "bin" / "java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(on_path)
    # Debian/Ubuntu (and most Linux packagers) install side-by-side JDKs here.
    found.extend(str(path) for path in sorted(Path("/usr/lib/jvm").glob("*/bin/java")))
    return list(dict.fromkeys(found))


def find_java(requested: str | None, accepted: Collection[int] = (17,)) -> str:
    """A java executable whose major version is in `accepted` (the requested one, if given)."""
    wanted = ", ".join(str(v) for v in sorted(accepted))
    if requested is not None:
        major = java_major_version(requested)
        if major in accepted:
            return requested
        raise StackError(
            f"KJ_JAVA={requested} is Java {major if major is not None else '(does not run)'}; "
            f"the stack needs Java {wanted}"
        )
    seen: list[str] = []
    for candidate in _candidates():
        major = java_major_version(candidate)
        if major in accepted:
            return candidate
        seen.append(f"{candidate} (Java {major})")
    raise StackError(
        f"no Java {wanted} found (looked at: {', '.join(seen) or 'nothing'}); "
        "install one or set KJ_JAVA"
    )
