"""Concurrent reclaimers and duty claimers on one store instant."""

from __future__ import annotations

from collections import Counter

import pytest

from boson_django import clock, services
from boson_django.errors import LeaseRejected
from boson_django.models import Job, QuarantinedFingerprint, Run
from tests.concurrency.support import row_locked_elsewhere, run_threads
from tests.factories import ADD, NOOP, envelope

LEASE_MS = 1_000


def _reclaim_until_empty(i: int) -> list[services.Reclaimed]:
    """Reclaim until no expired lease is left. An empty batch alone does not say so: the
    other reclaimer may hold the rest (their rows, or the fingerprint they would be
    quarantined under, which a sweep leaves for the next one), and stopping there left
    8 jobs expired when both reclaimers stopped at once (seen in CI)."""
    got: list[services.Reclaimed] = []
    for _ in range(10_000):
        batch = services.reclaim_expired(limit=15)
        got += batch
        if not batch and not Job.objects.filter(state="running", lease_expires_at__lte=clock.now()).exists():
            break
    return got


@pytest.mark.postgres
def test_a_reclaim_passes_over_an_expired_job_another_transaction_holds_and_the_next_takes_it(live_clock):
    """An empty batch does not say that no expired lease is left: a reclaim skips a job
    row another transaction holds (an ack, a renewal, another reclaimer) instead of
    waiting for it, and the next reclaim takes it."""
    (held,) = [r.id for r in services.enqueue([envelope(NOOP, queue="skip")])]
    services.admit("w1", ["skip"], 1, lease_ms=LEASE_MS)
    live_clock.advance(LEASE_MS)
    with row_locked_elsewhere("boson_job", "id", held):
        assert services.reclaim_expired() == []
    assert [(r.job_id, r.state) for r in services.reclaim_expired()] == [(held, "available")]


@pytest.mark.postgres
def test_a_reclaim_passes_over_a_job_whose_quarantine_fingerprint_is_held_and_the_next_takes_it(live_clock):
    """A job bound for quarantine under a fingerprint another transaction holds (a release
    from quarantine, say) is left for the next reclaim too."""
    services.set_task_config(ADD, crash_limit=1)
    services.enqueue([envelope(ADD, queue="fp", args=[1, 2]) for _ in range(2)])
    services.admit("w1", ["fp"], 2, lease_ms=LEASE_MS)
    live_clock.advance(LEASE_MS)
    (first,) = services.reclaim_expired(limit=1)  # registers the fingerprint
    fingerprint = Job.objects.get(id=first.job_id).fingerprint
    with row_locked_elsewhere("boson_quarantined_fingerprint", "fingerprint", fingerprint):
        assert services.reclaim_expired() == []
    (second,) = services.reclaim_expired()
    assert second.job_id != first.job_id and (first.state, second.state) == ("quarantined", "quarantined")


def test_two_reclaimers_reclaim_each_expired_job_exactly_once(live_clock):
    services.set_task_config(ADD, crash_limit=1)
    plain = [r.id for r in services.enqueue([envelope(NOOP, queue="rc") for _ in range(150)])]
    # Same arguments = same fingerprint: two reclaimers may quarantine them at once.
    poison = [r.id for r in services.enqueue([envelope(ADD, queue="rc", args=[1, i % 5]) for i in range(50)])]
    assert len(services.admit("w-old", ["rc"], 500, lease_ms=LEASE_MS)) == 200
    live_clock.advance(LEASE_MS)

    got = [r for mine in run_threads(2, _reclaim_until_empty) for r in mine]

    per_job = Counter(r.job_id for r in got)
    assert set(per_job) == set(plain) | set(poison)
    assert set(per_job.values()) == {1}, "a job was reclaimed twice"
    assert all(r.crash_attempt == 1 for r in got)
    assert {r.state for r in got if r.job_id in plain} == {"available"}
    assert {r.state for r in got if r.job_id in poison} == {"quarantined"}
    rows = Job.objects.filter(queue="rc")
    assert set(rows.values_list("crash_attempt", "attempt", "fence")) == {(1, 0, 1)}
    assert services.counts("rc")["available"] == 150
    assert services.counts("rc")["quarantined"] == 50
    assert QuarantinedFingerprint.objects.count() == 5
    lost = Counter(Run.objects.filter(outcome="lease_lost").values_list("job_id", flat=True))
    assert set(lost.values()) == {1} and len(lost) == 200
    assert not Run.objects.filter(finished_at__isnull=True).exists()


def test_reclaimers_racing_acks_move_each_job_once(live_clock):
    """Expired holders are reclaimed and their acks refused; live holders ack; never both."""
    services.enqueue([envelope(NOOP, queue="late") for _ in range(40)])
    short = services.admit("w-short", ["late"], 20, lease_ms=LEASE_MS)
    long = services.admit("w-long", ["late"], 20, lease_ms=5 * LEASE_MS)
    live_clock.advance(LEASE_MS)
    units = short + long

    def actor(i: int) -> tuple[int, int]:
        if i < 2:
            return len(_reclaim_until_empty(i)), 0
        acked = rejected = 0
        for unit in units[i - 2 :: 2]:
            try:
                services.ack(unit.lease, services.Outcome.SUCCESS)
                acked += 1
            except LeaseRejected:
                rejected += 1
        return acked, rejected

    (r0, _), (r1, _), (a2, x2), (a3, x3) = run_threads(4, actor)
    assert r0 + r1 == 20, "only the expired leases are reclaimed"
    assert (a2 + a3, x2 + x3) == (20, 20)
    short_ids = [u.lease.job_id for u in short]
    long_ids = [u.lease.job_id for u in long]
    assert set(Job.objects.filter(id__in=short_ids).values_list("state", "crash_attempt", "attempt")) == {("available", 1, 0)}
    assert set(Job.objects.filter(id__in=long_ids).values_list("state", "crash_attempt", "attempt")) == {("completed", 0, 1)}


def test_eight_claimers_at_one_instant_exactly_one_holds_the_duty(live_clock):
    def claim(i: int) -> bool:
        return services.claim_duty("sweep", f"node-{i}", 5_000)

    first = run_threads(8, claim)
    assert first.count(True) == 1, first
    winner = f"node-{first.index(True)}"

    again = run_threads(8, claim)
    assert again == [f"node-{i}" == winner for i in range(8)], "only the holder may extend"

    live_clock.advance(4_999)
    assert run_threads(8, claim).count(True) == 1
    live_clock.advance(5_000)
    after_expiry = run_threads(8, claim)
    assert after_expiry.count(True) == 1, after_expiry

    holder = f"node-{after_expiry.index(True)}"
    services.release_duty("sweep", holder)
    assert run_threads(8, claim).count(True) == 1
