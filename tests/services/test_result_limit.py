"""``MAX_RESULT_BYTES``: what a handler stores (its return value, a checkpoint, an output)
is bounded as enqueue bounds a payload; a larger one is refused naming the field, and
nothing of it is written."""

from __future__ import annotations

import re

import pytest

from boson_django import services
from boson_django.compat import TaskResultStatus
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job, JobData
from boson_django.services import Outcome
from tests.factories import running_job, state_of
from tests.testapp.more_tasks import extra
from tests.worker.conftest import burst

LIMIT = 64


@pytest.fixture
def small_limit(settings):
    settings.BOSON = {**settings.BOSON, "MAX_RESULT_BYTES": LIMIT}


@pytest.mark.parametrize("value, stored", [
    ("x" * 62, True),                                 # '"' + 62 + '"' = 64 bytes of JSON
    ("x" * 63, False),
    ("\u00e9" * 10, True),                            # each '\\u00e9' is six bytes: 62
    ("\u00e9" * 11, False),
    (["ab"] * 12, True),                              # 12 * 5 - 1 + 2 = 61
    (["ab"] * 13, False),
], ids=["str-at", "str-over", "escaped-at", "escaped-over", "list-at", "list-over"])
def test_a_return_value_over_the_limit_fails_its_job_without_a_retry(live_clock, small_limit, value, stored):
    """A retry would run the task again to return as much: the job fails (DISCARD)."""
    result = extra.using(max_attempts=5).enqueue(value)
    burst()
    got = extra.get_result(result.id)
    if stored:
        assert got.status == TaskResultStatus.SUCCESSFUL and got.return_value == value
        return
    assert got.status == TaskResultStatus.FAILED
    (error,) = got.errors
    assert error.exception_class is InvalidEnvelope
    (record,) = services.errors(result.id)
    assert record.outcome == "discard"
    assert re.match(f"boson_django.errors.InvalidEnvelope: return value: is \\d+ bytes of JSON, over MAX_RESULT_BYTES={LIMIT}\n",
                    record.error)
    assert not JobData.objects.filter(job_id=result.id, kind=JobData.Kind.RESULT).exists()


@pytest.mark.parametrize("write, field", [
    (lambda lease: services.checkpoint(lease, {"step": "x" * LIMIT}), "data"),
    (lambda lease: services.write_output(lease, ["x" * LIMIT]), "data"),
    (lambda lease: services.ack(lease, Outcome.SUCCESS, result="x" * LIMIT), "result"),
], ids=["checkpoint", "output", "ack-result"])
def test_a_stored_write_over_the_limit_is_refused_and_writes_nothing(store_clock, small_limit, write, field):
    unit = running_job()
    before = Job.objects.values().get(id=unit.lease.job_id)
    with pytest.raises(InvalidEnvelope, match=f"^{field}: is \\d+ bytes of JSON, over MAX_RESULT_BYTES={LIMIT}$"):
        write(unit.lease)
    assert Job.objects.values().get(id=unit.lease.job_id) == before
    assert not JobData.objects.filter(job_id=unit.lease.job_id).exists()
    assert state_of(unit.lease.job_id) == "running"
