"""Admission's store time is read once its jobs are locked, not before it waits for locks.

The general admission path waits for the buckets (and task caps) of its first
candidates; meanwhile a reclaimer may hand back a job whose lease expired, which a later
round of the same admission then claims. Stamped with the time read before the wait,
that claim started before the previous one ended (``find_problems``: two claims of one
job held at once) and its lease was shortened by the wait.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction

from boson_django import services
from boson_django.models import Bucket, Job, Run
from tests.concurrency.support import row_locked_elsewhere
from tests.factories import NOOP, envelope

LEASE_MS = 100


def _wait_until_someone_waits_for_a_lock() -> None:
    with connection.cursor() as cursor:
        for _ in range(2_000):
            cursor.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
            if cursor.fetchone()[0]:
                return
            threading.Event().wait(0.005)  # polling another backend's state, not store time
    raise AssertionError("the admitter never waited for the bucket")


@pytest.mark.postgres
def test_a_job_reclaimed_while_admission_waits_is_claimed_at_the_time_after_the_wait(live_clock):
    services.set_rate_limit("narrow", limit=1, window_ms=10**9)
    services.enqueue([envelope(NOOP, queue="drain", rate_class="narrow")])
    services.admit("w-drain", ["drain"], 1)  # takes the bucket's one token, for good
    (expiring,) = services.enqueue([envelope(NOOP, queue="ac")])
    services.admit("w-old", ["ac"], 1, lease_ms=LEASE_MS)
    services.enqueue([envelope(NOOP, queue="ac", rate_class="narrow")])  # never fits: a later round looks on
    locked, release = threading.Event(), threading.Event()
    admitted: list = []

    def hold_bucket() -> None:
        try:
            with transaction.atomic():
                Bucket.objects.select_for_update().get(name="narrow")
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    def admit() -> None:
        try:
            admitted.extend(services.admit("w-new", ["ac"], 1, lease_ms=LEASE_MS))
        finally:
            connection.close()

    holder, admitter = threading.Thread(target=hold_bucket), threading.Thread(target=admit)
    holder.start()
    assert locked.wait(30)
    admitter.start()
    try:
        _wait_until_someone_waits_for_a_lock()
        live_clock.advance(LEASE_MS)
        assert [r.job_id for r in services.reclaim_expired()] == [expiring.id]
    finally:
        release.set()
        holder.join(30)
        admitter.join(30)

    assert [unit.lease for unit in admitted] == [(expiring.id, 2)]
    row = Job.objects.get(id=expiring.id)
    assert row.attempted_at == live_clock.now()
    assert row.lease_expires_at == live_clock.now() + timedelta(milliseconds=LEASE_MS)  # not expired at birth
    problems = services.find_problems()
    assert not problems, [str(p) for p in problems]


@pytest.mark.postgres
def test_a_bucket_admits_no_more_than_its_capacity_at_the_instant_its_claims_are_stamped(live_clock):
    """The bucket is refilled at the time read before the wait, the claims stamped at the
    time after it. Saved as of the earlier time, the bucket earned the wait's tokens again
    for the next admitter: both admissions' runs started at one instant, twice the burst."""
    services.set_rate_limit("mail", limit=5, window_ms=1_000, burst=5)
    services.set_task_config(NOOP, max_active=100)  # a cap to wait for after the bucket
    services.enqueue([envelope(NOOP, queue="mail", rate_class="mail") for _ in range(12)])
    admitted: list = []

    def admit() -> None:
        try:
            admitted.extend(services.admit("w-slow", ["mail"], 12))
        finally:
            connection.close()

    admitter = threading.Thread(target=admit)
    with row_locked_elsewhere("boson_task_config", "task", NOOP):
        admitter.start()
        _wait_until_someone_waits_for_a_lock()  # bucket refilled and taken from: waits for the cap
        live_clock.advance(1_000)
    admitter.join(30)

    assert len(admitted) == 5
    assert services.admit("w-next", ["mail"], 12) == [], "the bucket earned the wait's tokens twice"
    live_clock.advance(1_000)
    assert len(services.admit("w-next", ["mail"], 12)) == 5
    stamps = Counter(run.started_at for run in Run.objects.filter(queue="mail"))
    assert max(stamps.values()) <= 5, stamps
