"""``boson_django.testing``: what users' own test suites get."""

from __future__ import annotations

from datetime import datetime, timezone

from boson_django import clock, services
from boson_django.compat import TaskResultStatus
from boson_django.testing import boson_clock as boson_clock  # noqa: F401 -- the fixture, as users import it
from boson_django.testing import frozen_clock, run_until_idle
from tests.testapp.tasks import add, async_add, exits, fail, inspect_context


def test_run_until_idle_runs_inline_inside_the_test_transaction(db):
    first, second = add.enqueue(1, 2), async_add.enqueue(3, 4)
    ctx = inspect_context.enqueue("inline")
    assert run_until_idle() == 3
    assert add.get_result(first.id).return_value == 3
    assert async_add.get_result(second.id).return_value == 7
    assert inspect_context.get_result(ctx.id).return_value["attempt"] == 1
    assert run_until_idle() == 0


def test_frozen_clock_steps_retries_into_view(db):
    at = datetime(2031, 5, 1, tzinfo=timezone.utc)
    with frozen_clock(at) as frozen:
        result = fail.using(max_attempts=2).enqueue("x")
        assert run_until_idle() == 1
        assert fail.get_result(result.id).status == TaskResultStatus.READY
        assert run_until_idle() == 0  # the retry is not due yet
        frozen.advance(2_000)
        assert frozen.now() == clock.now()
        assert run_until_idle() == 1
        assert fail.get_result(result.id).status == TaskResultStatus.FAILED
    assert clock.now().year != 2031


def test_boson_clock_fixture(boson_clock):  # noqa: F811
    before = boson_clock.now()
    assert boson_clock.advance(1_000) > before
    assert services.counts()["available"] == 0


def test_run_until_idle_reports_a_job_deleted_at_its_ack_finished_at_store_time(store_clock):
    """``task_finished`` of a job with retention 0 (its row gone by then) says it finished
    at store time, as its start does, not at the test process's own time."""
    from tests.signals import finished_results
    from tests.testapp.tasks import ephemeral

    with finished_results() as heard:
        result = ephemeral.enqueue()
        assert run_until_idle() == 1
    (finished,) = [r for r in heard if r.id == result.id]
    assert finished.started_at == finished.finished_at == store_clock.now()


def test_run_until_idle_times_out_a_handler_that_returns_past_its_timeout(store_clock):
    """As a worker would: the attempt is acked as timed out at the deadline and what the
    handler returns after is not stored. The store clock decides, so the handler steps
    it; one that returns in time succeeds."""
    from boson_django.models import Job
    from tests.testapp.tasks import takes_store_time

    late = takes_store_time.enqueue(1_500)
    in_time = takes_store_time.enqueue(999)
    assert run_until_idle() == 2
    late_result, in_time_result = takes_store_time.get_result(late.id), takes_store_time.get_result(in_time.id)
    assert late_result.status == TaskResultStatus.FAILED
    (error,) = late_result.errors
    assert error.exception_class_path == "boson_django.worker.outcomes.TaskTimeout"
    assert "overran timeout_ms=1000" in error.traceback
    assert Job.objects.get(id=late.id).state == "failed"
    assert (in_time_result.status, in_time_result.return_value) == (TaskResultStatus.SUCCESSFUL, "done")


def test_run_until_idle_ends_a_handlers_sys_exit_as_the_worker_does(db):
    """The job fails; the exit does not end the test run."""
    result = exits.using(max_attempts=1).enqueue(2)
    assert run_until_idle() == 1
    assert exits.get_result(result.id).status == TaskResultStatus.FAILED


NIGHTLY = {"nightly": {"task": "tests.testapp.tasks.noop", "cron": "0 3 * * *"}}


def _fire_nightly() -> int:
    """What a test of a schedule does: step the frozen clock past 03:00, run the
    scheduler; returns how many jobs it made."""
    from boson_django import schedules
    from boson_django.models import Job

    with frozen_clock(datetime(2031, 1, 1, 2, 59, tzinfo=timezone.utc)) as frozen:
        schedules.run_due()
        frozen.advance(60_000)
        schedules.run_due()
    return Job.objects.filter(meta__schedule="nightly").count()


def test_a_schedule_fires_in_every_test_whose_transaction_rolled_back_the_last_ones_rows(db, settings):
    """Each TestCase test rolls back the rows the scheduler's first pass synced: the next
    test's pass must sync them again, not trust that this process already did."""
    from django.db import transaction

    settings.BOSON = {**settings.BOSON, "SCHEDULES": NIGHTLY}
    for _ in range(2):  # two tests, each in its own (rolled back) transaction
        with transaction.atomic():
            assert _fire_nightly() == 1
            transaction.set_rollback(True)


def test_a_schedule_fires_in_every_test_after_the_last_one_flushed_the_database(transactional_db, settings):
    """A TransactionTestCase flushes the database after each test (``flush``)."""
    from django.core.management import call_command

    settings.BOSON = {**settings.BOSON, "SCHEDULES": NIGHTLY}
    for _ in range(2):
        assert _fire_nightly() == 1
        call_command("flush", interactive=False, verbosity=0)
