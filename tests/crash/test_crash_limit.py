"""A job that keeps killing workers parks in quarantine, and so do its later twins."""

from __future__ import annotations

from django.test import override_settings

from boson_django import services
from boson_django.models import QuarantinedFingerprint
from tests.factories import ADD, enqueue_one, state_of

LEASE_MS = 1_000
CRASH_LIMIT_3 = override_settings(BOSON={"CRASH_LIMIT": 3, "TASK_MODULES": ["tests.testapp.more_tasks"]})


def _crash_once(store_clock, job_id: str) -> services.Reclaimed:
    (unit,) = services.admit("w-doomed", ["poison"], 1, lease_ms=LEASE_MS)
    assert unit.lease.job_id == job_id
    store_clock.advance(LEASE_MS)
    (reclaimed,) = services.reclaim_expired()
    return reclaimed


@CRASH_LIMIT_3
def test_three_lease_expiries_quarantine_without_burning_attempts(store_clock):
    job_id = enqueue_one(ADD, queue="poison", args=[6, 7])
    for crash in (1, 2):
        reclaimed = _crash_once(store_clock, job_id)
        assert (reclaimed.state, reclaimed.crash_attempt) == ("available", crash)
        envelope, state = services.job_state(job_id)
        assert state == "available"
    reclaimed = _crash_once(store_clock, job_id)
    assert (reclaimed.state, reclaimed.crash_attempt) == ("quarantined", 3)

    from boson_django.models import Job

    job = Job.objects.get(id=job_id)
    assert (job.state, job.attempt, job.crash_attempt, job.fence) == ("quarantined", 0, 3, 3)
    assert [r.outcome for r in services.errors(job_id)] == ["lease_lost"] * 3
    assert QuarantinedFingerprint.objects.filter(fingerprint=job.fingerprint, job_id=job_id).exists()
    store_clock.advance(10 * 365 * 86_400_000)
    assert services.evict_retained() == 0 and state_of(job_id) == "quarantined", "quarantine never expires"
    assert services.admit("w", ["poison"], 10) == []


@CRASH_LIMIT_3
def test_a_later_twin_is_parked_and_release_frees_both(store_clock):
    first = enqueue_one(ADD, queue="poison", args=[6, 7])
    for _ in range(3):
        _crash_once(store_clock, first)
    twin = enqueue_one(ADD, queue="poison", args=[6, 7])
    other = enqueue_one(ADD, queue="poison", args=[6, 8])
    assert state_of(twin) == "quarantined"
    assert state_of(other) == "available", "a different fingerprint is not parked"
    (why,) = services.errors(twin)
    assert "quarantined" in why.error and first in why.error

    assert services.release_quarantined(first) is True

    from boson_django.models import Job

    for job_id in (first, twin):
        job = Job.objects.get(id=job_id)
        assert (job.state, job.crash_attempt, job.attempt) == ("available", 0, 0)
    assert not QuarantinedFingerprint.objects.exists()
    assert state_of(enqueue_one(ADD, queue="poison", args=[6, 7])) == "available"
    admitted = {u.lease.job_id for u in services.admit("w", ["poison"], 10)}
    assert {first, twin, other} <= admitted


@CRASH_LIMIT_3
def test_release_of_the_twin_frees_the_original_too(store_clock):
    first = enqueue_one(ADD, queue="poison", args=[1, 1])
    for _ in range(3):
        _crash_once(store_clock, first)
    twin = enqueue_one(ADD, queue="poison", args=[1, 1])
    assert services.release_quarantined(twin) is True
    assert (state_of(first), state_of(twin)) == ("available", "available")
    assert services.release_quarantined(twin) is False, "releasing twice changes nothing"
