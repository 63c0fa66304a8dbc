"""SQLite's ack statements: the shared ones (:class:`~boson_django.drivers.acks.AckStatements`).

SQLite has no single-statement plain-success batch: every ack takes the general path,
whose statements list the batch (bounded by the parameters SQLite binds per statement).
The transaction holds the whole file's write lock, so the rows need no lock of their own.
"""

from __future__ import annotations

from boson_django.drivers.acks import AckStatements


class SQLiteAcks(AckStatements):
    """Every ack statement as :class:`AckStatements` writes it."""
