"""Real threads and real processes against the real store.

Every thread gets its own Django connection (Django's connections are per thread) and
closes it when done; every subprocess is a fresh interpreter that opens the same
database the test uses (the SQLite file via ``BOSON_SQLITE_PATH``, or the PostgreSQL
test database by name).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from boson_django.models import Job, Run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOIN_TIMEOUT_S = 60


def run_threads(count: int, target: Callable[[int], Any]) -> list[Any]:
    """Start ``count`` threads on one barrier, each calling ``target(i)``; return their results.

    Re-raises the first exception any thread hit, so a failure inside a thread fails the test.
    """
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    failures: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i,), name=f"boson-test-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a thread did not finish (deadlock?)"
    if failures:
        raise failures[0]
    return results


@contextmanager
def row_locked_elsewhere(table: str, key: str, value: str) -> Iterator[None]:
    """Hold the lock on ``table``'s row whose ``key`` is ``value`` from another connection
    (``FOR UPDATE``, PostgreSQL) until the block ends."""
    locked, done = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT 1 FROM {table} WHERE {key} = %s FOR UPDATE", [value])
                locked.set()
                done.wait(JOIN_TIMEOUT_S)
        finally:
            connection.close()

    holder = threading.Thread(target=hold, name="boson-test-lock")
    holder.start()
    try:
        assert locked.wait(JOIN_TIMEOUT_S), f"could not lock {table} row {value!r}"
        yield
    finally:
        done.set()
        holder.join(JOIN_TIMEOUT_S)


def subprocess_env() -> dict[str, str]:
    """Environment that makes a child interpreter open the database this test uses."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if connection.vendor == "postgresql":
        env["BOSON_TEST_DB"] = "postgres"
        env["BOSON_PG_NAME"] = connection.settings_dict["NAME"]
    else:
        env["BOSON_TEST_DB"] = "sqlite"
        env["BOSON_SQLITE_PATH"] = str(connection.settings_dict["NAME"])
    return env


def start_python(script: str, args: Sequence[str] = (), **popen: Any) -> subprocess.Popen[str]:
    """A child interpreter running ``script`` with Django set up on the test database."""
    prelude = "import django; django.setup()\n"
    return subprocess.Popen(
        [sys.executable, "-c", prelude + script, *args],
        env=subprocess_env(), cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen,
    )


def assert_each_admitted_once(job_ids: Sequence[str], fence: int = 1) -> None:
    """Exactly one run per job, all with ``fence``; every job's fence is ``fence``."""
    runs = list(Run.objects.filter(job_id__in=job_ids).values_list("job_id", "fence"))
    per_job: dict[str, list[int]] = {}
    for job_id, run_fence in runs:
        per_job.setdefault(job_id, []).append(run_fence)
    missing = set(job_ids) - set(per_job)
    assert not missing, f"{len(missing)} jobs never admitted, e.g. {sorted(missing)[:3]}"
    twice = {j: f for j, f in per_job.items() if f != [fence]}
    assert not twice, f"jobs admitted more than once or at a wrong fence: {dict(list(twice.items())[:3])}"
    fences = set(Job.objects.filter(id__in=job_ids).values_list("fence", flat=True))
    assert fences == {fence}, fences
