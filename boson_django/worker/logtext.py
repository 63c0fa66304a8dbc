"""Text from elsewhere (a task's error message, a database's) made safe for one log line.

A task's error is whatever its exception said: carriage returns that overwrite the line
on a terminal, ANSI escapes that recolour or clear it, newlines that forge another line.
The worker's own log escapes them (``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``) instead.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with every character that is not printable escaped as Python would write it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
