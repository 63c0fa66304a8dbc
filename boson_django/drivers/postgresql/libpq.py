"""The prepared statements of the hot paths, run on libpq itself.

:func:`boson_django.drivers.postgresql.session.one_statement` runs the worker's claim and
ack flush and the one-job enqueue as prepared statements, here without psycopg's cursor
machinery (converting the query, its cache of prepared statements, dumping each
parameter, its non-blocking wait). Each statement is
prepared once per database session under a name of its own, its parameters go as text,
it runs with ``PQexecPrepared`` (which waits with the GIL released) and its rows are read
by the cursor's own loaders, so they come back exactly as the cursor returned them.

Only parameters whose text form is unambiguous go this way: None, bool, int, float, str
and aware datetimes. Their types come from the statement (a ``%s`` with nothing to type
it is text): the hot statements cast or compare each parameter. A statement with any
other value -- or a str PostgreSQL would refuse, such as one holding a NUL -- runs
through the cursor as before (:func:`run` returns None), so its error is psycopg's own.
One difference remains: while the statement waits (for a row lock, say), a signal's
Python handler runs only once it returns.

Only a statement that is its own transaction (autocommit, none open) goes this way, which
is how the worker runs its claims and flushes and how a one-job enqueue outside
``atomic`` runs. In a transaction the cursor runs it: psycopg sends ``DEALLOCATE ALL`` at
each rollback, and while it re-prepares its own statements, a statement of ours found
deallocated in a transaction could not be run again (the failure aborts the
transaction); on its own it simply is (prepared again, under a new name). Nor would
psycopg have sent the ``BEGIN`` (with its isolation level) of a transaction Django's
``atomic`` opened and that has yet to run its first statement.

This reaches into psycopg below its documented API (its ``Transformer``, the libpq
wrapper's results, ``errors.error_from_result``). Each new database session first runs a
probe through all of it; if psycopg has changed (an attribute gone, a signature changed),
the fast path is given up for the rest of the process, with one warning, and every
statement runs through the cursor: slower, never wrong, and the worker loop goes on.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

#: The statement was deallocated (``DEALLOCATE ALL``, which psycopg sends at each
#: rollback) or its plan no longer fits the tables (a migration changed a column the
#: statement returns): prepared again under a new name.
_GONE = {b"26000", b"0A000"}

log = logging.getLogger("boson_django")

#: Why the fast path was given up in this process (None: it is in use).
_given_up: str | None = None

#: The probe each new session runs before its first statement (as libpq's unnamed
#: statement: nothing of it stays prepared).
_PROBE = b"SELECT $1::int AS boson_probe"


class _Session:
    """What one database session has prepared; a new connection starts a new one."""

    def __init__(self, pgconn: Any, cursor: Any):
        from psycopg.adapt import Transformer

        self.pgconn = pgconn
        self.prepared: set[bytes] = set()
        #: Each statement's column names, read from its first result (fixed while it stays
        #: prepared: a plan whose result changes fails, and all are prepared again).
        self.columns: dict[bytes, list[str]] = {}
        self.generation = 0
        self.loader = Transformer(cursor)  # the cursor's adapters: its loaders read the rows


def run(connection: Any, cursor: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]] | None:
    """Run ``sql`` (``%s`` placeholders) prepared, with ``params``; its rows as dicts, or
    None when a parameter or the statement has no plain text form (run it on ``cursor``).
    The statement is its own transaction: None when the connection is in one."""
    if _given_up is not None:
        return None
    raw = connection.connection
    if not (raw.autocommit and _idle(raw)):
        return None  # in a transaction: see the module's docstring
    statement = _statement(sql)
    values = _text_params(params, raw.info.encoding)
    if statement is None or values is None:
        return None
    session = _session(connection, raw, cursor)
    if session is None:
        return None
    result = _execute(session, statement, values)
    if _failed(result) and _sqlstate(result) in _GONE and _idle(raw):
        session.prepared.clear()
        session.columns.clear()
        session.generation += 1  # the old names may linger on the server: use new ones
        result = _execute(session, statement, values)
    if _failed(result):
        raise _error(result, raw)
    return _rows(session, result, statement[0])


def _execute(session: _Session, statement: tuple[bytes, bytes], values: list[bytes | None]) -> Any:
    name = _name(statement, session.generation)
    if name not in session.prepared:
        prepared = session.pgconn.prepare(name, statement[1])
        if _failed(prepared):
            return prepared
        session.prepared.add(name)
    return session.pgconn.exec_prepared(name, values)


def _rows(session: _Session, result: Any, stem: bytes) -> list[dict[str, Any]]:
    loader = session.loader
    loader.set_pgresult(result)
    names = session.columns.get(stem)
    if names is None:
        names = session.columns[stem] = [result.fname(i).decode() for i in range(result.nfields)]
    rows: list[dict[str, Any]] = loader.load_rows(0, result.ntuples, lambda values: dict(zip(names, values)))
    return rows


def _session(connection: Any, raw: Any, cursor: Any) -> _Session | None:
    """This database session's state, probed when new (None: the fast path is given up)."""
    session: _Session | None = getattr(connection, "boson_libpq_session", None)
    if session is None or session.pgconn is not raw.pgconn:
        session = _probed(raw, cursor)
        connection.boson_libpq_session = session
    return session


def _probed(raw: Any, cursor: Any) -> _Session | None:
    """A new session once the probe has run through every psycopg internal the fast path
    uses; None, the fast path given up for good, if one of them has changed. A database
    error (the connection lost, say) is raised as the cursor would raise it."""
    import psycopg

    try:
        session = _Session(raw.pgconn, cursor)
        _pq(), errors_api()  # the error path's names, which a successful probe does not reach
        result = session.pgconn.prepare(b"", _PROBE)
        if not _failed(result):
            result = session.pgconn.exec_prepared(b"", [b"1"])
        if _failed(result):
            raise _error(result, raw)
        rows = _rows(session, result, b"")
        session.columns.clear()
        if rows != [{"boson_probe": 1}]:
            raise ValueError(f"the probe read {rows!r} instead of [{{'boson_probe': 1}}]")
    except psycopg.Error:
        raise
    except Exception as exc:  # noqa: BLE001 -- psycopg's internals changed: the cursor's way from now on
        give_up(exc)
        return None
    return session


def give_up(exc: BaseException) -> None:
    """Run every statement through psycopg's cursor from now on in this process, saying
    why once."""
    global _given_up
    if _given_up is None:
        _given_up = f"{type(exc).__name__}: {exc}"
        log.warning("boson: the hot statements' fast path on libpq does not work with this psycopg (%s, %s); "
                    "they run through psycopg's cursor from now on (correct, a little slower)",
                    _psycopg_version(), _given_up)


def _psycopg_version() -> str:
    import psycopg

    return f"psycopg {getattr(psycopg, '__version__', '?')}"


def errors_api() -> tuple[Any, Any]:
    """What the error path calls: ``errors.error_from_result`` and the SQLSTATE field."""
    from psycopg import errors
    from psycopg.pq import DiagnosticField

    return errors.error_from_result, DiagnosticField.SQLSTATE


@functools.lru_cache(maxsize=64)
def _statement(sql: str) -> tuple[bytes, bytes] | None:
    """The statement's name stem and its text with ``$n`` placeholders (None: it holds a
    ``%`` that is not a placeholder, which only psycopg's parser handles)."""
    parts = sql.split("%s")
    if any("%" in part for part in parts):
        return None
    text = parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], start=1))
    return hashlib.sha1(sql.encode()).hexdigest()[:16].encode(), text.encode()


def _name(statement: tuple[bytes, bytes], generation: int) -> bytes:
    return b"boson_%s_%d" % (statement[0], generation)


def _text_params(params: Sequence[Any], encoding: str) -> list[bytes | None] | None:
    """Each parameter's text form (:func:`_text`), or None if one has none. The str, None
    and int parameters that make up most of a statement's are converted here, in line."""
    values: list[bytes | None] = []
    append = values.append
    for value in params:
        kind = type(value)
        if kind is str:
            try:
                text = value.encode(encoding)
            except UnicodeEncodeError:
                return None
            if 0 in text:  # a NUL (the byte search; ``b"\x00" in`` costs eight times as much)
                return None
            append(text)
        elif value is None:
            append(None)
        elif kind is int:
            append(b"%d" % value)
        else:
            other = _text(value, encoding)
            if other is _NO_TEXT:
                return None
            append(other)  # type: ignore[arg-type]
    return values


_NO_TEXT = object()


def _text(value: Any, encoding: str) -> bytes | None | object:
    """PostgreSQL's text form of ``value``, or ``_NO_TEXT`` when psycopg should adapt it."""
    kind = type(value)
    if value is None:
        return None
    if kind is str:
        try:
            text = value.encode(encoding)
        except UnicodeEncodeError:
            return _NO_TEXT
        return _NO_TEXT if 0 in text else text
    if kind is bool:
        return b"t" if value else b"f"
    if kind is int:
        return b"%d" % value
    if kind is float:
        return repr(value).encode()
    if isinstance(value, datetime) and value.utcoffset() is not None:
        return value.isoformat().encode()
    return _NO_TEXT


def _sqlstate(result: Any) -> bytes | None:
    from psycopg.pq import DiagnosticField

    state: bytes | None = result.error_field(DiagnosticField.SQLSTATE)
    return state


def _failed(result: Any) -> bool:
    return result.status not in _pq().succeeded


def _idle(raw: Any) -> bool:
    """Out of any transaction: the failed statement can simply be run again."""
    return raw.pgconn.transaction_status == _pq().idle


@functools.cache
def _pq() -> Any:
    """The libpq statuses these checks compare with, looked up once (psycopg is imported
    only when a statement runs: psycopg2 may be the driver)."""
    from types import SimpleNamespace

    from psycopg.pq import ExecStatus, TransactionStatus

    return SimpleNamespace(
        succeeded=frozenset({ExecStatus.COMMAND_OK, ExecStatus.TUPLES_OK}), idle=TransactionStatus.IDLE
    )


def _error(result: Any, raw: Any) -> Exception:
    """The psycopg exception the cursor would have raised (Django maps it to its own)."""
    from psycopg import errors

    return errors.error_from_result(result, encoding=raw.info.encoding)
