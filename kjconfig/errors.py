"""The project's one error root, `JournalError`: here, below `journal/` and `stack/`, because
the settings loader raises it too (`SettingsError`); `journal.errors` builds the rest of the
hierarchy on it and is where callers import it from.
"""

from __future__ import annotations


class JournalError(Exception):
    """Anything the core raises on purpose."""
