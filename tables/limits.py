"""The tables' bounds' defaults (tables/expiry.py, tables/store.py), apart so that the
settings (app/settings.py) name them without importing Faust."""

from __future__ import annotations

DEFAULT_EXPIRY_WINDOW = 10_000  # deadlines held in memory per owned partition, read per load
# time entries a build step writes after an upgrade: a changelog record each, under Faust's
# producer buffer (100 records: past it Faust pauses the stream until it drains)
DEFAULT_EXPIRY_BUILD_STEP = 64
# changelog records a partition must have to restore for the worker to read them ahead of
# Faust's recovery (tables/store.py): 1, any, since all of a table's partitions are read in
# one pass of the worker's kept consumer (~450 records/s through Faust at 32 short partitions)
DEFAULT_RESTORE_AHEAD_MIN = 1
