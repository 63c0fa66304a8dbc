"""Releases from quarantine racing one another and racing enqueues of the same fingerprint.

A release frees every job parked under its fingerprint. Two operators releasing two of
those jobs at once must not deadlock on each other's rows, and a job that an enqueue parks
under the fingerprint while the release runs must not stay parked behind a fingerprint
the release has already cleared.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from boson_django import services
from boson_django.models import Job, QuarantinedFingerprint
from tests.concurrency.support import run_threads
from tests.factories import ADD, envelope

LEASE_MS = 1_000
ROUNDS = 12
RELEASERS = 4


def _parked(live_clock, queue: str, args: list[int], count: int) -> list[str]:
    """``count`` jobs of one fingerprint in quarantine: the first reached its crash limit
    (crash_limit 1, one expired lease), the rest were parked by it at enqueue."""
    services.set_task_config(ADD, crash_limit=1)
    (first,) = services.enqueue([envelope(ADD, queue=queue, args=args)])
    assert [u.lease.job_id for u in services.admit("w", [queue], 1, lease_ms=LEASE_MS)] == [first.id]
    live_clock.advance(LEASE_MS)
    assert [r.state for r in services.reclaim_expired(10)] == ["quarantined"]
    rest = services.enqueue([envelope(ADD, queue=queue, args=args) for _ in range(count - 1)], unique=False)
    ids = [first.id, *(r.id for r in rest)]
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {"quarantined"}
    return ids


@pytest.mark.postgres
def test_concurrent_releases_of_one_fingerprint_release_every_job_once_without_deadlock(live_clock):
    for round_ in range(ROUNDS):
        ids = _parked(live_clock, f"q{round_}", [round_, 0], RELEASERS)
        fingerprint = Job.objects.get(id=ids[0]).fingerprint

        released = run_threads(RELEASERS, lambda i, ids=ids: services.release_quarantined(ids[-1 - i]))

        assert sorted(released) == [False] * (RELEASERS - 1) + [True], released
        assert set(Job.objects.filter(id__in=ids).values_list("state", "crash_attempt")) == {("available", 0)}
        assert not QuarantinedFingerprint.objects.filter(fingerprint=fingerprint).exists()


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _waits_on_a_lock(pid: int, done: threading.Event) -> bool:
    """Poll pg_stat_activity (no time-based sleep): True once ``pid`` waits for a lock,
    False if its work finished first."""
    with connection.cursor() as cursor:
        while not done.is_set():
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
            row = cursor.fetchone()
            if row and row[0] == "Lock":
                return True
    return False


@pytest.mark.postgres
def test_a_job_parked_while_the_release_runs_is_released_with_the_others(live_clock):
    """An enqueue parks a job under the fingerprint in a transaction still open while the
    operator releases it: the release waits for that transaction, then frees its job too."""
    ids = _parked(live_clock, "q", [7, 7], 1)
    parked_in, commit = threading.Event(), threading.Event()
    release_pid: list[int] = []
    pid_known, release_done = threading.Event(), threading.Event()
    out: dict[str, object] = {}

    def enqueuer() -> None:
        try:
            with transaction.atomic():
                (out["late"],) = services.enqueue([envelope(ADD, queue="q", args=[7, 7])], unique=False)
                parked_in.set()
                assert commit.wait(30)
        finally:
            connection.close()

    def releaser() -> None:
        try:
            assert parked_in.wait(30)
            release_pid.append(_backend_pid())
            pid_known.set()
            out["released"] = services.release_quarantined(ids[0])
        finally:
            release_done.set()
            connection.close()

    threads = [threading.Thread(target=enqueuer), threading.Thread(target=releaser)]
    for thread in threads:
        thread.start()
    try:
        assert parked_in.wait(30)
        assert pid_known.wait(30)
        waited = _waits_on_a_lock(release_pid[0], release_done)
    finally:
        commit.set()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads)

    late = out["late"]
    assert out["released"] is True
    assert Job.objects.get(id=late.id).state == "available", "the job parked meanwhile stayed in quarantine"
    assert waited, "the release did not wait for the enqueue that parked a job under its fingerprint"
    assert set(Job.objects.filter(id__in=[*ids, late.id]).values_list("state", flat=True)) == {"available"}
