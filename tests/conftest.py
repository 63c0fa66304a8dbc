"""Shared fixtures: a frozen store clock, database marks, job factories."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from boson_django import clock
from tests import databases

EPOCH = datetime(2030, 1, 1, tzinfo=timezone.utc)


def pytest_collection_modifyitems(config, items):
    from django.conf import settings

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    skip = pytest.mark.skip(reason="needs PostgreSQL (row locks / SKIP LOCKED); run with BOSON_TEST_DB=postgres")
    for item in items:
        if "postgres" in item.keywords and not on_postgres:
            item.add_marker(skip)


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of what is left (an -x or Ctrl-C run)
def pytest_sessionfinish(session, exitstatus):
    """On PostgreSQL, a run that leaves one of its databases behind fails, naming it; the
    database is dropped. Only this run's names count (tests/databases.py): other runs'
    databases on a shared server are neither reported nor touched."""
    from django.conf import settings

    if not settings.configured or not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        return
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller checks for it
        return
    import psycopg

    try:
        left = databases.left_behind(keep_test_database=bool(session.config.getoption("reuse_db", False)),
                                     workers=_xdist_workers(session.config))
    except psycopg.OperationalError as error:  # the server is gone: the run has failed already, loudly
        _say(session, f"could not check for databases left behind: {error}")
        return
    if left:
        databases.drop(*left)
        _say(session, f"FAILED: the run left PostgreSQL databases behind (dropped now): {', '.join(left)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _xdist_workers(config) -> list[str]:
    """The ids of the xdist workers this run started (``gw0``, ``gw1``...), none without -n."""
    if not config.pluginmanager.hasplugin("dsession"):
        return []
    return [f"gw{index}" for index in range(len(config.getoption("tx", None) or []))]


@pytest.fixture(scope="session")
def django_db_modify_db_settings_xdist_suffix():
    """pytest-django's own per-worker suffix, left out: each xdist worker already has its own
    names, in the environment its subprocesses inherit (tests/databases.py)."""


def _say(session, line: str) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(line, red=True)
    else:
        print(line, file=sys.stderr)


def pytest_configure(config):
    """The fault suite's seed (tests/faults/support.py), chosen once here, before pytest-xdist
    starts its workers: each inherits it, and the summary prints the seed they all used."""
    import random

    os.environ.setdefault("BOSON_FAULT_SEED", str(random.SystemRandom().randrange(2**32)))


def pytest_terminal_summary(terminalreporter):
    seed = os.environ["BOSON_FAULT_SEED"]
    terminalreporter.write_line(f"boson fault seed: {seed} (replay with BOSON_FAULT_SEED={seed})")


def pytest_report_header(config):
    from django.conf import settings

    return f"boson store: {settings.DATABASES['default']['ENGINE']}"


class FrozenClock:
    """The store clock, frozen; step it with ``advance(ms)``. Seen by every process."""

    def __init__(self, at: datetime):
        self.at = clock.freeze(at)

    def now(self) -> datetime:
        return clock.now()

    def advance(self, ms: int) -> datetime:
        return clock.advance(ms)

    def freeze(self, at: datetime) -> datetime:
        return clock.freeze(at)


@pytest.fixture
def store_clock(db):
    """Freeze the store clock at 2030-01-01T00:00Z for the test."""
    frozen = FrozenClock(EPOCH)
    yield frozen
    clock.unfreeze()


@pytest.fixture
def live_clock(transactional_db):
    """A frozen clock committed to the database, for tests with threads or processes."""
    frozen = FrozenClock(EPOCH)
    yield frozen
    clock.unfreeze()


#: How far from real time :func:`far_clock` freezes the store clock.
FAR = {"3 days ahead": timedelta(days=3), "3 days behind": timedelta(days=-3)}


@pytest.fixture(params=list(FAR.values()), ids=list(FAR))
def far_clock(request, transactional_db):
    """The store clock frozen three days ahead of, then behind, real time (committed, for
    workers): whatever read a process's own clock instead would be three days off."""
    frozen = FrozenClock(datetime.now(timezone.utc).replace(microsecond=0) + request.param)
    yield frozen
    clock.unfreeze()


@pytest.fixture
def vendor() -> str:
    return connection.vendor
