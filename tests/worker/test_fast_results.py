"""The worker builds a first-run job's TaskResults from its admission unit (no query);
they must equal what ``build_result`` reads from the store at the same moment."""

from __future__ import annotations

from boson_django import services
from boson_django.services import AckRequest, Outcome
from boson_django.taskresults import build_result, completed_result, running_result
from tests.factories import ADD, enqueue_one

FIELDS = ("id", "status", "enqueued_at", "started_at", "finished_at", "last_attempted_at",
          "args", "kwargs", "backend", "errors", "worker_ids")


def _same(a, b) -> None:
    assert {f: getattr(a, f) for f in FIELDS} == {f: getattr(b, f) for f in FIELDS}
    assert a.task == b.task


def test_first_run_results_equal_the_stored_ones(store_clock):
    enqueue_one(ADD, args=[2, 3], queue="fast")
    (unit,) = services.admit("w1", ["fast"], 1)
    assert unit.first_run
    started = running_result(unit, "w1", "default")
    _same(started, build_result(unit.lease.job_id, "default", using="default"))
    assert started == build_result(unit.lease.job_id, "default", using="default")  # every field, defaults too
    store_clock.advance(5)
    (reply,) = services.ack_many([AckRequest(unit.lease, Outcome.SUCCESS, result=5)])
    finished = completed_result(started, reply.at, 5)
    stored = build_result(unit.lease.job_id, "default", using="default")
    _same(finished, stored)
    assert finished.return_value == stored.return_value == 5


def test_a_job_with_history_is_not_a_first_run(store_clock):
    job_id = enqueue_one(ADD, args=[1, 1], queue="again", max_attempts=3)
    (unit,) = services.admit("w1", ["again"], 1)
    services.ack(unit.lease, Outcome.RETRY, error="x", delay_ms=1)
    store_clock.advance(10)
    services.promote_due(10)
    (again,) = services.admit("w2", ["again"], 1)
    assert again.lease.job_id == job_id and not again.first_run
    assert running_result(again, "w2", "default") is None


def test_a_cancelled_then_retried_job_is_not_a_first_run(store_clock):
    job_id = enqueue_one(ADD, args=[1, 1], queue="cx")
    services.cancel(job_id)
    services.retry(job_id)
    (unit,) = services.admit("w1", ["cx"], 1)
    assert not unit.first_run


import dataclasses  # noqa: E402

import pytest  # noqa: E402

from boson_django.taskresults import _evolved, _made  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _Plain:
    a: int
    b: list
    c: str = "c"


@dataclasses.dataclass(frozen=True, slots=True)
class _Slotted:
    a: int
    b: list
    c: str = "c"


@pytest.mark.parametrize("cls", [_Plain, _Slotted])
def test_results_are_built_field_by_field_as_init_would(cls):
    made = _made(cls, a=1, b=[2])
    assert made == cls(a=1, b=[2])
    assert _evolved(made, c="d") == cls(a=1, b=[2], c="d")
    assert _evolved(made, c="d").b is made.b  # fields not changed are carried over as they are
    with pytest.raises(TypeError):
        _made(cls, b=[2])  # a field with no default must be given
