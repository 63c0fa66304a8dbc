"""Operator controls racing workers and sweeps (row locks matter on PostgreSQL; SQLite
serializes writers, and the same tests check its busy retries).

An operator's release from quarantine locks the fingerprint, then the jobs parked
under it; a reclaimer quarantining a job of the same fingerprint locks that job, then
registers the fingerprint; an enqueue parking a job under it holds the fingerprint
while its unique keys may wait for other jobs. Read without a lock, the fingerprint
could be deleted under a reclaim that counted on it, leaving a quarantined job whose
fingerprint is gone; locked in a mode that conflicts with the enqueue's, it deadlocked.
(Releases racing releases and enqueues: tests/concurrency/test_quarantine.py.)
"""

from __future__ import annotations

from boson_django import services
from boson_django.models import Bucket, Job, QuarantinedFingerprint
from tests.concurrency.support import run_threads
from tests.factories import NOOP, envelope

LEASE_MS = 1_000
ROUNDS = 8


def _quarantined_and_expiring(fingerprint: str, queue: str, expiring: int) -> str:
    """One job quarantined under ``fingerprint`` and ``expiring`` jobs of the same
    fingerprint still running, their leases expired: the next reclaim quarantines them. Returns the first job's id."""
    env = [envelope(NOOP, queue=queue, args=[i], fingerprint=fingerprint) for i in range(1 + expiring)]
    ids = [r.id for r in services.enqueue(env)]
    services.admit("w-first", [queue], 1, lease_ms=LEASE_MS)
    services.admit("w-rest", [queue], expiring, lease_ms=3 * LEASE_MS)
    return ids[0]


def _assert_sound() -> None:
    problems = services.find_problems()
    assert not problems, [str(p) for p in problems]


def test_release_from_quarantine_racing_a_reclaim_of_the_same_fingerprint(live_clock):
    """The released fingerprint is either re-registered by the reclaim that quarantines a
    sibling, or that sibling is released with the rest: never a quarantined job whose
    fingerprint is gone."""
    services.set_task_config(NOOP, crash_limit=1)
    for n in range(ROUNDS):
        first = _quarantined_and_expiring(f"poison-{n}", f"rq-{n}", expiring=4)
        live_clock.advance(LEASE_MS)
        assert [r.state for r in services.reclaim_expired()] == ["quarantined"]
        live_clock.advance(2 * LEASE_MS)
        # One release against four reclaimers of its siblings, one job per transaction.
        run_threads(5, lambda i, first=first: services.reclaim_expired(limit=1) if i else services.release_quarantined(first))
        while services.reclaim_expired():
            pass

    _assert_sound()
    parked = Job.objects.filter(state="quarantined").values_list("fingerprint", flat=True)
    assert set(parked) <= set(QuarantinedFingerprint.objects.values_list("fingerprint", flat=True))




def test_enqueue_parking_under_a_fingerprint_a_reclaim_registers_does_not_deadlock(live_clock):
    """An enqueue holds the fingerprint it parks under while its unique key waits for the
    job a reclaimer is quarantining under that fingerprint: the reclaimer must not wait
    for the enqueue in turn."""
    services.set_task_config(NOOP, crash_limit=1)
    for n in range(ROUNDS):
        fingerprint, queue = f"key-{n}", f"rk-{n}"
        first = _quarantined_and_expiring(fingerprint, queue, expiring=0)
        keyed = [envelope(NOOP, queue=queue, args=[i], fingerprint=fingerprint, unique_key=f"k-{n}-{i}") for i in range(4)]
        services.enqueue(keyed)
        services.admit("w-keyed", [queue], 4, lease_ms=3 * LEASE_MS)
        live_clock.advance(LEASE_MS)
        assert services.job_state(first)[1] == "running"
        assert [r.state for r in services.reclaim_expired(limit=1)] == ["quarantined"]
        live_clock.advance(2 * LEASE_MS)

        def actor(i: int, n: int = n, queue: str = queue, fingerprint: str = fingerprint) -> object:
            if i == 0:
                return services.reclaim_expired()
            again = envelope(NOOP, queue=queue, args=[i - 1], fingerprint=fingerprint, unique_key=f"k-{n}-{i - 1}")
            return services.enqueue([again])

        run_threads(5, actor)

    _assert_sound()


def test_operators_creating_one_rate_limit_at_once_all_succeed(live_clock):
    """``set_rate_limit`` is idempotent also when the bucket is new to all of them: the
    last to commit sets the limit, and none fails on the name the first one inserted."""
    for n in range(ROUNDS):
        run_threads(4, lambda i, n=n: services.set_rate_limit(f"new-{n}", limit=10 + i, window_ms=1_000))

    limits = dict(Bucket.objects.values_list("name", "limit"))
    assert sorted(limits) == sorted(f"new-{n}" for n in range(ROUNDS))
    assert set(limits.values()) <= {10, 11, 12, 13}
