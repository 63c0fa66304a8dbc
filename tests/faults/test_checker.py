"""The checker itself: ``context.in_ack`` effects, the new ``find_problems()`` rules, and
``manage.py boson_check``. Each rule is shown to fire on a row broken by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from boson_django import services
from boson_django.models import Job, Run
from boson_django.testing import run_until_idle
from tests.factories import enqueue_one, running_job
from tests.faults.checker import assert_sound, effects_of, problems
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process
from tests.testapp.models import Effect

THEN = "tests.testapp.fault_tasks.effect_then"


def _rules() -> set[str]:
    return {p.rule for p in services.find_problems(stranded_after_ms=0)}


def test_an_in_ack_effect_commits_with_a_success_ack_only(store_clock):
    ok = enqueue_one(THEN, args=["returns"])
    raised = enqueue_one(THEN, args=["raises"])
    skipped = enqueue_one(THEN, args=["skips"])
    assert run_until_idle() == 3
    assert effects_of(ok) == [1] and effects_of(raised) == [] and effects_of(skipped) == []
    assert [services.job_state(j)[1] for j in (ok, raised, skipped)] == ["completed", "retryable", "skipped"]
    assert_sound([ok, raised, skipped])


def test_an_effect_that_raises_rolls_back_the_ack_and_counts_as_a_failure(store_clock):
    job_id = enqueue_one(THEN, args=["effect-raises"])
    assert run_until_idle() == 1
    assert Effect.objects.count() == 0  # the first effect of the pair was rolled back too
    job = Job.objects.get(id=job_id)
    assert (job.state, job.attempt) == ("retryable", 1)
    assert services.errors(job_id)[-1].error.startswith("builtins.ValueError: the effect itself failed")
    assert_sound([job_id])


def test_find_problems_names_a_claim_whose_fence_did_not_grow(store_clock):
    unit = running_job()
    services.ack(unit.lease, "success")
    run = Run.objects.get(job_id=unit.lease.job_id)
    Run.objects.create(job_id=run.job_id, task=run.task, queue=run.queue, attempt=2, fence=run.fence,
                       worker_id="w-ghost", started_at=run.finished_at, finished_at=run.finished_at, outcome="retry")
    assert "fence that did not grow between two claims" in _rules()


def test_find_problems_names_two_claims_held_at_once(store_clock):
    unit = running_job()
    Run.objects.create(job_id=unit.lease.job_id, task="t", queue="q", attempt=1, fence=unit.lease.fence + 1,
                       worker_id="w-ghost", started_at=store_clock.now(), finished_at=store_clock.now(), outcome="retry")
    assert "two claims of one job held at once" in _rules()


def test_find_problems_names_attempt_and_crash_counts_the_runs_do_not_explain(store_clock):
    unit = running_job()
    services.ack(unit.lease, "success")
    Job.objects.filter(id=unit.lease.job_id).update(attempt=2, crash_attempt=1)
    rules = _rules()
    assert "attempt that differs from the handler outcomes its runs record" in rules
    assert "crash_attempt that differs from the lease losses since the last quarantine release" in rules


def test_find_problems_names_a_stranded_lease_only_when_asked(store_clock):
    unit = running_job(lease_ms=1_000)
    store_clock.advance(5_000)
    assert services.find_problems() == []
    (problem,) = services.find_problems(stranded_after_ms=1_000)
    assert problem.job_ids == [unit.lease.job_id] and "stranded" in problem.rule
    assert services.find_problems(stranded_after_ms=10_000) == []


def _lease_on_an_available_job():
    Job.objects.filter(id=enqueue_one()).update(lease_holder="w-ghost")


def _running_without_its_open_run():
    Run.objects.filter(job_id=running_job().lease.job_id).delete()


def _open_run_of_a_job_no_longer_running():
    Job.objects.filter(id=running_job().lease.job_id).update(state="available", lease_holder=None, lease_expires_at=None)


def _run_with_a_future_fence():
    unit = running_job()
    Run.objects.filter(job_id=unit.lease.job_id).update(fence=unit.lease.fence + 5)


def _two_runs_with_one_fence():
    unit = running_job()
    services.ack(unit.lease, "success")
    run = Run.objects.get(job_id=unit.lease.job_id)
    Run.objects.create(job_id=run.job_id, task=run.task, queue=run.queue, attempt=1, fence=run.fence,
                       worker_id="w-ghost", started_at=run.started_at, finished_at=run.finished_at, outcome="success")


def _run_of_a_missing_job():
    Run.objects.create(job_id="no-such-job", task="t", queue="q", attempt=1, fence=1, worker_id="w-ghost",
                       started_at=Job.objects.get(id=enqueue_one()).enqueued_at)


def _attempt_beyond_max_attempts():
    job_id = enqueue_one()
    Job.objects.filter(id=job_id).update(attempt=Job.objects.get(id=job_id).max_attempts + 1)


def _finished_without_finalized_at():
    unit = running_job(retention_ms=60_000)
    services.ack(unit.lease, "success")
    Job.objects.filter(id=unit.lease.job_id).update(finalized_at=None)


def _quarantined_without_its_fingerprint():
    Job.objects.filter(id=enqueue_one()).update(state="quarantined")


@pytest.mark.parametrize(("break_it", "rule"), [
    (_lease_on_an_available_job, "lease left on a job that is not running"),
    (_running_without_its_open_run, "running job without exactly one open run of its fence"),
    (_open_run_of_a_job_no_longer_running, "open run of a job that is not running under that fence"),
    (_run_with_a_future_fence, "run with a fence the job never had"),
    (_two_runs_with_one_fence, "two runs of one job with the same fence"),
    (_run_of_a_missing_job, "run or data of a job that no longer exists"),
    (_attempt_beyond_max_attempts, "attempt beyond max_attempts"),
    (_finished_without_finalized_at, "finished job without finalized_at"),
    (_quarantined_without_its_fingerprint, "quarantined job whose fingerprint is not registered"),
], ids=lambda v: v.__name__.strip("_") if callable(v) else "")
def test_find_problems_names_each_shape_rule(store_clock, break_it, rule):
    assert services.find_problems() == []
    break_it()
    assert rule in _rules()


def test_every_rule_of_find_problems_is_covered_here():
    """Each rule of ``find_problems`` is made to fire by a test in this module."""
    from boson_django.services import invariants

    source = open(__file__).read()
    assert [rule for rule in invariants._CHECKS if rule not in source] == []


def test_the_scenario_checker_names_lost_strangers_and_double_effects(store_clock):
    known = enqueue_one(THEN, args=["returns"])
    stranger = enqueue_one(THEN, args=["returns"])
    run_until_idle()
    Effect.objects.create(job_id=known, fence=1, at=store_clock.now() + timedelta(seconds=1))
    found = "\n".join(problems([known, "never-existed"]))
    assert f"job {stranger} was never enqueued" in found
    assert "job never-existed was lost" in found
    assert f"job {known} has 2 committed effects" in found


def test_boson_check_exits_zero_when_sound_and_one_with_problems(store_clock, capsys):
    unit = running_job()
    call_command("boson_check")
    assert "no problems found" in capsys.readouterr().out
    Job.objects.filter(id=unit.lease.job_id).update(lease_holder=None)
    with pytest.raises(CommandError) as raised:
        call_command("boson_check")
    assert raised.value.returncode == 1
    assert f"PROBLEM running job without a lease: 1 job(s): {unit.lease.job_id}" in capsys.readouterr().out
