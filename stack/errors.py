"""The one exception the stack raises for anything an operator must fix or look at.

Contract: messages say what failed and where to look (a log file, a variable to set).
"""

from __future__ import annotations


class StackError(RuntimeError):
    """A server could not be resolved, configured, started, stopped or reached."""
