"""Every failure the store reports, one class each."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, DatabaseError

from boson_django.compat import InvalidTaskError


class StoreError(Exception):
    """Base class of every error boson_django raises on purpose."""


class LeaseRejected(StoreError):
    """A write under a lease whose fence, state or expiry no longer matches."""


class DuplicateJobId(StoreError):
    """An explicit job id that already exists in the store."""


class InvalidEnvelope(StoreError, ValueError):
    """Bad input: the message names the offending field (and, inside a JSON value, where
    in it: ``at`` is a path such as ``[0]['name']``)."""

    def __init__(self, field: str, message: str, *, index: int | None = None, at: str = ""):
        self.field = field
        self.index = index
        #: The message without the field's name.
        self.reason = message
        #: Where in the field's value (a JSON path, ``[0]['name']``), or empty.
        self.at = at
        where = f"envelope[{index}].{field}" if index is not None else field
        super().__init__(f"{where}{at}: {message}")


class UnsupportedType(InvalidEnvelope, TypeError):
    """A value of a type JSON cannot hold (a set, a datetime, an object). Also a
    ``TypeError``, which is what Django's own backends raise for it at enqueue, so
    ``except TypeError`` around ``task.enqueue(...)`` catches it here too."""


class InvalidTask(InvalidEnvelope, InvalidTaskError):
    """A task, or an option of it, the Tasks backend cannot accept (a queue name the store
    cannot hold, a policy option out of range, ``.using(crash_limit=...)``): Django's
    ``InvalidTask`` (``InvalidTaskError`` on the backport), raised where Django raises it
    -- from the backend's ``validate_task``, so at ``@task`` and ``.using()``, and from
    ``enqueue`` -- and still an ``InvalidEnvelope`` naming the field."""


class StoreNotMigrated(StoreError, DatabaseError):
    """An enqueue into a database that does not have boson_django's tables: ``manage.py
    migrate`` has not run there. A ``DatabaseError`` still (code catching the driver's
    ``no such table`` catches it); ``__cause__`` is that error, ``missing`` the tables."""

    def __init__(self, alias: str, missing: list[str]):
        self.alias = alias
        self.missing = missing
        command = "python manage.py migrate" + ("" if alias == DEFAULT_DB_ALIAS else f" --database {alias}")
        super().__init__(
            f"boson_django's tables are not in database {alias!r} (no {', '.join(missing)}): "
            f"run `{command}` before enqueueing"
        )


class UnknownJob(StoreError, LookupError):
    """A job id that the store does not hold."""


class ControlInterrupted(StoreError):
    """A control over many jobs stopped at a database error (a lock timeout, a deadlock, a
    dropped connection). The chunks before it committed, and ``result`` (a
    ``services.Controlled``) says what they did; the failing chunk changed nothing, and
    ``not_reached`` lists the ids it and the later chunks held. ``__cause__`` is the
    database error. Called inside your own transaction, each chunk was a savepoint: the
    earlier chunks are still pending in that transaction and commit or roll back with it."""

    def __init__(self, result: object, not_reached: list[str], cause: BaseException):
        self.result = result
        self.not_reached = not_reached
        super().__init__(f"stopped with {len(not_reached)} jobs not reached: {cause}")


class JobCancelled(StoreError):
    """An operator cancelled the job (shown as the error of a cancelled job)."""


class JobQuarantined(StoreError):
    """The job's fingerprint crashed workers up to the crash limit; an operator must release it."""


class LeaseLost(StoreError):
    """The worker running the job stopped renewing its lease (crash, kill or stall)."""


class UnregisteredTaskWarning(RuntimeWarning):
    """A task config was written for a name no registered task has (not deployed yet, or a typo)."""
