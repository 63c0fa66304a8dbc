"""Helpers for your project's own tests.

``run_until_idle()`` runs queued jobs inline -- in the calling thread, through the real
services (admission, acks, retries, signals), so it works inside Django's ``TestCase``
transaction -- until nothing is due. ``frozen_clock()`` freezes the store clock for a
block so that backoff, schedules and retention can be stepped instead of waited for::

    from boson_django.testing import frozen_clock, run_until_idle

    def test_welcome_mail(db):
        with frozen_clock() as clock:
            send_welcome.enqueue(42)
            assert run_until_idle() == 1
            clock.advance(60_000)          # let a retry come due
            run_until_idle()

With pytest, ``boson_clock`` is a ready-made fixture: add
``from boson_django.testing import boson_clock  # noqa: F401`` to your ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from boson_django import clock, services
from boson_django import database
from boson_django.worker.attempt import Attempt
from boson_django.worker.completer import deliver
from boson_django.worker.executor import resolve, run_sync
from boson_django.worker.outcomes import Finish

TEST_WORKER_ID = "boson-testing"


def run_until_idle(
    queues: Sequence[str] | None = None, *, max_jobs: int = 10_000, promote: bool = True, using: str | None = None
) -> int:
    """Run due jobs one at a time until none is left; returns how many ran.

    Due scheduled and retryable jobs are promoted first (``promote=False`` runs only
    what is already available). A job that retries with backoff runs again only once its
    time has come on the store clock -- advance a frozen clock to get there.
    """
    alias = database.alias(using)
    ran = 0
    while ran < max_jobs:
        if promote:
            services.promote_due(using=alias)
        units = services.admit(TEST_WORKER_ID, list(queues or []), 1, using=alias)
        if not units:
            return ran
        attempt = Attempt(units[0], TEST_WORKER_ID, alias)
        found = resolve(attempt, {})
        finish = found if isinstance(found, Finish) else run_sync(attempt, found)
        deliver(attempt, _within_timeout(attempt, finish, alias))
        ran += 1
    return ran


def _within_timeout(attempt: Attempt, finish: Finish, using: str) -> Finish:
    """The attempt's outcome, or a timeout if its handler returned past the job's
    ``timeout_ms`` on the store clock: what a worker acks for it (it acks at the deadline
    and refuses what the handler returns after). A frozen clock moves only when the test
    advances it, so a handler that should overrun advances it itself."""
    if attempt.deadline is None or not attempt.overran(clock.now(using)):
        return finish
    return attempt.timeout_finish(list(finish.logs))


class FrozenClock:
    """The frozen store clock: ``now()``, ``advance(ms)``, ``freeze(at)``."""

    def __init__(self, using: str | None = None):
        self.using = using

    def now(self) -> datetime:
        return clock.now(self.using)

    def advance(self, ms: int | float) -> datetime:
        return clock.advance(ms, self.using)

    def freeze(self, at: datetime) -> datetime:
        return clock.freeze(at, self.using)


@contextmanager
def frozen_clock(at: datetime | None = None, *, using: str | None = None) -> Iterator[FrozenClock]:
    """Freeze the store clock (at ``at``, default now) for the block; every process
    using the database sees it once it is committed (inside a test's transaction, only
    the test's connection does). The clock runs again afterwards."""
    clock.freeze(at, using)
    try:
        yield FrozenClock(using)
    finally:
        clock.unfreeze(using)


def _fixture() -> Any:
    try:
        import pytest
    except ImportError:  # pragma: no cover - pytest is optional
        return None

    @pytest.fixture
    def boson_clock(db: Any) -> Iterator[FrozenClock]:
        """The store clock frozen for one test (needs pytest-django's ``db``)."""
        with frozen_clock() as frozen:
            yield frozen

    return boson_clock


boson_clock = _fixture()
