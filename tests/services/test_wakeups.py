"""Operator controls that make jobs available wake idle workers, as an enqueue does.

A retry, a release from quarantine and a queue's resume each send the queue's NOTIFY
when their transaction commits; a refused control, or one rolled back, sends nothing.
Without it an idle worker would start those jobs only at its next poll.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import override_settings

from boson_django import services
from tests.factories import NOOP, enqueue_one, state_of
from tests.services.support import drive, listening, start_job
from tests.testapp.tasks import add
from tests.worker.conftest import Idle, ThreadWorker, state, wait_until

pytestmark = pytest.mark.postgres


def test_an_operator_retry_wakes_the_job_s_queue_at_commit(live_clock):
    failed = drive("failed", live_clock)
    running = drive("running", live_clock)
    with listening() as heard:
        assert services.retry(running.job_id) is False  # refused: nothing became available
        assert heard() == []
        with transaction.atomic():
            assert services.retry(failed.job_id) is True
            assert heard() == []  # not before the commit: a worker would find nothing
        assert heard() == ["walk"]
    assert state_of(failed.job_id) == "available"


def test_a_rolled_back_retry_wakes_no_one(live_clock):
    cancelled = drive("cancelled", live_clock)
    with listening() as heard:
        with pytest.raises(RuntimeError), transaction.atomic():
            assert services.retry(cancelled.job_id) is True
            raise RuntimeError("roll back")
        assert heard() == []
    assert state_of(cancelled.job_id) == "cancelled"


def test_a_release_from_quarantine_wakes_every_queue_it_released_into(live_clock):
    services.set_task_config(NOOP, crash_limit=1)
    poison = start_job(queue="north", args=[1])
    live_clock.advance(1_000)
    services.reclaim_expired(10)  # its crash limit: quarantined, its fingerprint registered
    parked = [poison.job_id, enqueue_one(NOOP, queue="south", args=[1])]  # same fingerprint: parked at once
    assert [state_of(j) for j in parked] == ["quarantined", "quarantined"]
    with listening() as heard:
        assert services.release_quarantined(parked[0]) is True
        assert heard() == ["north", "south"]
    assert [state_of(j) for j in parked] == ["available", "available"]


def test_resuming_a_queue_wakes_its_workers(live_clock):
    services.pause_queue("held")
    with listening() as heard:
        services.pause_queue("held")
        assert heard() == []  # a pause makes nothing available
        services.resume_queue("held")
        assert heard() == ["held"]


def test_an_idle_worker_starts_a_resumed_queue_s_jobs_without_waiting_for_its_poll(live_clock):
    slow_poll = {"TASK_MODULES": ["tests.testapp.more_tasks"], "POLL_INTERVAL_MS": 600_000, "SWEEP_INTERVAL_MS": 600_000}
    services.pause_queue("default")
    result = add.enqueue(2, 3)
    with override_settings(BOSON=slow_poll):
        runner = ThreadWorker(poll_interval_ms=600_000)
        idle = Idle(runner)
        with runner:
            wait_until(idle, what="an idle worker, listening")
            assert runner.worker.sweeper.seconds_left() > 0  # its sweeps are not due for minutes
            assert state(result.id) == "available"  # paused: the worker found nothing to start
            services.resume_queue("default")
            wait_until(lambda: state(result.id) == "completed", what="the wake-up after the resume")
    assert add.get_result(result.id).return_value == 5
