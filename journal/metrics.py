"""Process-wide counters and gauges, rendered in the Prometheus text format.

Small on purpose: the core counts what an operator must see (quarantined records, truncated
reads, read paths); the web layer renders `METRICS.render()` at `/metrics`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(slots=True)
class Counter:
    name: str
    labels: tuple[tuple[str, str], ...] = ()
    value: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:  # the Cassandra driver's threads may count too
            self.value += amount


class Metrics:
    def __init__(self) -> None:
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], Counter] = {}
        self._lock = threading.Lock()

    def counter(self, name: str, **labels: str) -> Counter:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            found = self._counters.get(key)
            if found is None:
                found = self._counters[key] = Counter(name, key[1])
            return found

    def value(self, name: str, **labels: str) -> float:
        found = self._counters.get((name, tuple(sorted(labels.items()))))
        return 0.0 if found is None else found.value

    def render(self) -> str:
        lines: list[str] = []
        typed: set[str] = set()
        for counter in sorted(self._counters.values(), key=lambda c: (c.name, c.labels)):
            if counter.name not in typed:
                typed.add(counter.name)
                lines.append(f"# TYPE {counter.name} counter")
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in counter.labels)
            suffix = f"{{{label_text}}}" if label_text else ""
            lines.append(f"{counter.name}{suffix} {counter.value:g}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


METRICS = Metrics()
