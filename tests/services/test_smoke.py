from boson_django import services
from boson_django.services import Outcome
from tests.factories import enqueue_one, running_job, state_of


def test_enqueue_admit_ack_success(store_clock):
    unit = running_job()
    assert state_of(unit.lease.job_id) == "running"
    assert services.ack(unit.lease, Outcome.SUCCESS, result={"ok": 1}) == "completed"
    assert state_of(unit.lease.job_id) == "completed"
    assert services.get_result(unit.lease.job_id).data == {"ok": 1}


def test_enqueue_scheduled_then_promoted(store_clock):
    from datetime import timedelta

    job_id = enqueue_one(run_at=store_clock.now() + timedelta(seconds=5))
    assert state_of(job_id) == "scheduled"
    assert services.promote_due(10) == 0
    store_clock.advance(5000)
    assert services.promote_due(10) == 1
    assert state_of(job_id) == "available"


def test_find_problems_is_empty_after_a_lifecycle_and_names_a_broken_row(store_clock):
    from boson_django.models import Job

    unit = running_job()
    services.ack(unit.lease, Outcome.RETRY, error="x")
    assert services.find_problems() == []
    Job.objects.filter(id=unit.lease.job_id).update(state="running")
    problems = {p.rule: p.job_ids for p in services.find_problems()}
    assert problems["running job without a lease"] == [unit.lease.job_id]
