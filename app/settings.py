"""A worker's settings: the journal's (`journal.settings.Settings`) plus its own place.

Every value has a `KJ_*` variable (KJ_WEB_PORT, KJ_DATADIR, KJ_INSTANCE_ID, ...) and a flag
of `kafka-journal worker`; flags win.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from journal.settings import Settings


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    journal: Settings
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    datadir: Path = Path(".worker")
    instance_id: str | None = None  # static group membership: a restart keeps the partitions
    app_id: str = "kafka-journal"  # Faust's app id: the consumer group and the tables' prefix
    max_body_bytes: int = 4 * 1024 * 1024
    read_wait_s: float = 2.0  # how long a read waits for the owner's agent to pass its Mark

    @property
    def url(self) -> str:
        return f"http://{self.web_host}:{self.web_port}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> WorkerSettings:
        env = os.environ if env is None else env
        port = int(str(overrides.get("web_port") or env.get("KJ_WEB_PORT", "6066")))
        datadir = overrides.get("datadir") or env.get("KJ_DATADIR") or f".worker/{port}"
        return cls(
            journal=Settings.from_env(env),
            web_host=str(overrides.get("web_host") or env.get("KJ_WEB_HOST", "127.0.0.1")),
            web_port=port,
            datadir=Path(str(datadir)),
            instance_id=_optional(overrides.get("instance_id") or env.get("KJ_INSTANCE_ID")),
            app_id=env.get("KJ_APP_ID", "kafka-journal"),
        )


def _optional(value: object) -> str | None:
    return None if value in (None, "") else str(value)
