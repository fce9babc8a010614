"""The expiry index's bounds' defaults (tables/expiry.py), apart so that the settings
(app/settings.py) name them without importing Faust."""

from __future__ import annotations

DEFAULT_EXPIRY_WINDOW = 10_000  # deadlines held in memory per owned partition, read per load
# time entries a build step writes after an upgrade: a changelog record each, under Faust's
# producer buffer (100 records: past it Faust pauses the stream until it drains)
DEFAULT_EXPIRY_BUILD_STEP = 64
