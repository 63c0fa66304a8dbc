"""Property-based: arbitrary envelopes, arguments and delays thrown at the public API.

Every call either succeeds or raises a documented error (``InvalidEnvelope`` -- a
``ValueError`` --, ``DuplicateJobId``, ``LeaseRejected``, ``UnknownJob``), nothing is
half-written, and ``find_problems()`` stays clean after every example.

Seeded: the seed is printed in the run's summary (``boson fault seed``) and in every
failure; ``BOSON_FAULT_SEED=<n>`` replays a run.
"""

from __future__ import annotations

from datetime import timezone

import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from boson_django import services
from boson_django.errors import DuplicateJobId, InvalidEnvelope, LeaseRejected, UnknownJob
from boson_django.models import Job
from boson_django.services import Envelope, Outcome
from tests.faults.support import SEED
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

DOCUMENTED = (InvalidEnvelope, DuplicateJobId, LeaseRejected, UnknownJob)
TASKS = ["tests.testapp.fault_tasks.effect", "tests.testapp.tasks.noop", "tests.testapp.tasks.add"]
PROFILE = settings(
    max_examples=60, deadline=None, print_blob=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_like = st.recursive(json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                         max_leaves=12)
junk = st.sampled_from([object(), {1, 2}, b"bytes", complex(1, 2), float("nan"), float("inf"), (1, 2), {1: "int key"}])
anything = json_like | junk
numbers = (st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([None, "5", True, 10**18]))
names = st.sampled_from(TASKS) | st.text(max_size=30) | st.sampled_from(["", " ", "os.system", "tests.testapp.tasks.wait_for_file"])
moments = st.none() | st.datetimes(timezones=st.just(timezone.utc)) | st.datetimes() | st.sampled_from(["2030-01-01", 0])

envelopes = st.builds(
    Envelope, task=names,
    id=st.none() | st.text(max_size=70) | st.sampled_from(["fixed-id", ""]),
    queue=st.none() | st.text(max_size=120) | st.sampled_from(["default", "", "q"]),
    args=st.lists(anything, max_size=3) | anything, kwargs=st.dictionaries(st.text(max_size=5), anything, max_size=3) | anything,
    priority=numbers, run_at=moments,
    unique_key=st.none() | st.text(max_size=300) | st.sampled_from(["k1", "k2"]),
    weight=numbers, rate_class=st.none() | st.text(max_size=10), max_attempts=numbers,
    retention_ms=numbers, lease_ms=numbers, timeout_ms=numbers, meta=st.dictionaries(st.text(max_size=5), anything, max_size=2) | anything,
)


def _clean() -> None:
    problems = services.find_problems()
    assert problems == [], [str(p) for p in problems]


@pytest.mark.slow
@seed(SEED)
@PROFILE
@given(batch=st.lists(envelopes, min_size=1, max_size=3), unique=st.booleans())
def test_enqueue_of_arbitrary_envelopes_succeeds_or_raises_a_documented_error(store_clock, batch, unique):
    note(f"boson fault seed {SEED}")
    before = Job.objects.count()
    try:
        results = services.enqueue(batch, unique=unique)
    except DOCUMENTED:
        assert Job.objects.count() == before, "a refused enqueue wrote something"
    else:
        created = [r for r in results if r.disposition == "created"]
        assert Job.objects.count() == before + len(created)
    _clean()


@pytest.mark.slow
@seed(SEED)
@PROFILE
@given(outcome=st.sampled_from(list(Outcome)) | st.text(max_size=12), delay=numbers,
       weight=numbers, result=anything, error=st.none() | st.text(max_size=50) | junk,
       logs=st.lists(st.text(max_size=10), max_size=3) | anything)
def test_acks_with_arbitrary_outcomes_and_delays(store_clock, outcome, delay, weight, result, error, logs):
    note(f"boson fault seed {SEED}")
    (job,) = services.enqueue([Envelope(task=TASKS[1], queue="props")])
    (unit,) = services.admit("w-props", ["props"], 1)
    try:
        services.ack(unit.lease, outcome, delay_ms=delay, actual_weight=weight, result=result, error=error, logs=logs)
    except DOCUMENTED:
        found = Job.objects.get(id=job.id)
        assert (found.state, found.fence, found.attempt) == ("running", unit.lease.fence, 0), "refused ack wrote"
        services.ack(unit.lease, Outcome.SUCCESS)
    _clean()


@seed(SEED)
@PROFILE
@given(lease_ms=numbers, step_ms=st.integers(min_value=0, max_value=10**9), limit=numbers, window=numbers, burst=numbers,
       duty_ms=numbers, checkpoint=anything, current=numbers, total=numbers)
def test_leases_duties_buckets_and_fenced_writes_with_arbitrary_numbers(
    store_clock, lease_ms, step_ms, limit, window, burst, duty_ms, checkpoint, current, total
):
    note(f"boson fault seed {SEED}")
    services.enqueue([Envelope(task=TASKS[1], queue="props2")])
    calls = [
        lambda: services.admit("w-props", ["props2"], 1, lease_ms=lease_ms),
        lambda: services.set_rate_limit("props-class", limit, window, burst),
        lambda: services.claim_duty("props-duty", "w-props", duty_ms),
        lambda: services.promote_due(limit), lambda: services.reclaim_expired(limit), lambda: services.evict_retained(limit),
    ]
    units = []
    for call in calls:
        try:
            out = call()
        except DOCUMENTED:
            continue
        if isinstance(out, list) and out and hasattr(out[0], "lease"):
            units += out
    for unit in units:
        for write in (lambda u=unit: services.checkpoint(u.lease, checkpoint),
                      lambda u=unit: services.write_progress(u.lease, current, total),
                      lambda u=unit: services.renew([u.lease], lease_ms)):
            try:
                write()
            except DOCUMENTED:
                pass
    store_clock.advance(step_ms)
    services.reclaim_expired()
    _clean()

