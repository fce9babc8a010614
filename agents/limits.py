"""The agents' bounds' defaults, apart so that the settings (app/settings.py) name them without
importing Faust."""

from __future__ import annotations

DEFAULT_CATCH_UP_CONCURRENCY = 4  # partitions catching up from Kafka at once, per worker
