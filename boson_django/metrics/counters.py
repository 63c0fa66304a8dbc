"""Process counters and histograms, fed by the transitions this process commits."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter, Histogram

from boson_django import transitions
from boson_django.metrics import REGISTRY

#: Seconds: 5 ms to an hour, roughly x2.5 per bucket.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 150, 300, 900, 1800, 3600)

TRANSITIONS = Counter("boson_transitions", "Job transitions committed by this process, by event.",
                      ["event"], registry=REGISTRY)
ENQUEUED = Counter("boson_enqueued", "Jobs created by enqueue in this process.", ["queue"], registry=REGISTRY)
ADMISSIONS = Counter("boson_admissions", "Jobs admitted (leased to a worker) by this process.", ["queue"], registry=REGISTRY)
OUTCOMES = Counter("boson_outcomes", "Acks by handler outcome.", ["queue", "outcome"], registry=REGISTRY)
ATTEMPT_SECONDS = Histogram("boson_attempt_duration_seconds", "Admission to ack of each acked attempt (store clock).",
                            ["queue"], buckets=DURATION_BUCKETS, registry=REGISTRY)
WAIT_SECONDS = Histogram("boson_wait_seconds", "Due (run_at) to admission of each admitted job (store clock).",
                         ["queue"], buckets=DURATION_BUCKETS, registry=REGISTRY)
LEASE_LOSSES = Counter("boson_lease_losses", "Leases lost: expired (found by the reclaimer) or revoked by a cancel.",
                       ["queue", "reason"], registry=REGISTRY)
RECLAIMS = Counter("boson_reclaims", "Expired leases reclaimed back to available.", ["queue"], registry=REGISTRY)
QUARANTINES = Counter("boson_quarantines", "Jobs quarantined (crash limit reached, or a quarantined fingerprint).",
                      ["queue"], registry=REGISTRY)


def observe(records: Sequence[transitions.Transition]) -> None:
    for r in records:
        TRANSITIONS.labels(r.event).inc()
        handler = _HANDLERS.get(r.event)
        if handler is not None:
            handler(r)


def _enqueued(r: transitions.Transition) -> None:
    ENQUEUED.labels(r.queue).inc()
    if r.state == "quarantined":
        QUARANTINES.labels(r.queue).inc()


def _admitted(r: transitions.Transition) -> None:
    ADMISSIONS.labels(r.queue).inc()
    if r.wait_s is not None:
        WAIT_SECONDS.labels(r.queue).observe(r.wait_s)


def _acked(r: transitions.Transition) -> None:
    OUTCOMES.labels(r.queue, r.outcome or "").inc()
    if r.duration_s is not None:
        ATTEMPT_SECONDS.labels(r.queue).observe(r.duration_s)


def _reclaimed(r: transitions.Transition) -> None:
    LEASE_LOSSES.labels(r.queue, "expired").inc()
    (QUARANTINES if r.state == "quarantined" else RECLAIMS).labels(r.queue).inc()


def _cancelled(r: transitions.Transition) -> None:
    if r.outcome == "lease_revoked":
        LEASE_LOSSES.labels(r.queue, "cancelled").inc()


_HANDLERS = {"enqueued": _enqueued, "admitted": _admitted, "acked": _acked, "reclaimed": _reclaimed, "cancelled": _cancelled}


def install() -> None:
    transitions.subscribe(observe)
