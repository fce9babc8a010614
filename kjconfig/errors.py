"""The project's one error root, `JournalError`: here, below `journal/` and `stack/`, because
the settings loader raises it too (`SettingsError`), and so does a client's TLS check
(`TlsRefused`); `journal.errors` builds the rest of the hierarchy on it and is where callers
import it from.
"""

from __future__ import annotations


class JournalError(Exception):
    """Anything the core raises on purpose."""


class TlsRefused(JournalError, PermissionError):
    """A TLS handshake with a server failed: its certificate is not trusted, not for the name
    connected to, expired, or the server speaks no TLS. The message names the server and the
    reason; no wait cures it (so it is no `Unavailable`). Raised by `kjconfig.access`."""
