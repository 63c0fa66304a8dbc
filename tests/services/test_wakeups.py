"""Whatever makes jobs available tells the workers, at commit.

Every enqueue path -- the Tasks backend, ``services.enqueue`` of one job, of a batch,
streamed through COPY -- wakes the workers of the queues that got a job they may start
now (not for a duplicate, a scheduled or a parked job). A retry, a release from quarantine and a queue's resume make jobs available: each sends
the queue's NOTIFY when its transaction commits, as an enqueue does (without it an idle
worker would start those jobs only at its next poll). A cancel of a running job revokes
its lease: it tells the worker holding it on the lease channel, which renews at once
(without it the handler would be asked to stop only at the next heartbeat). A refused
control, or one rolled back, sends nothing.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from boson_django import conf, services
from boson_django.services import wakeups
from boson_django.drivers.postgresql.enqueue import COPY_FROM
from boson_django.services.wakeups import lease_channel
from boson_django.worker.notify import Listener, Waker
from datetime import timedelta

from tests.factories import NOOP, enqueue_one, envelope, state_of
from tests.services.support import drive, listening, start_job
from tests.testapp.tasks import add
from tests.worker.conftest import idle_worker, state, wait_until

pytestmark = pytest.mark.postgres


def test_every_enqueue_path_wakes_the_queues_that_got_a_job_to_start(live_clock):
    later = live_clock.now() + timedelta(hours=1)
    with listening() as heard:
        services.enqueue([envelope(NOOP, queue="alone")])  # one job, one statement
        assert heard() == ["alone"]
        with transaction.atomic():
            services.enqueue([envelope(NOOP, queue="joined")])
            assert heard() == []
        assert heard() == ["joined"]
        services.enqueue([envelope(NOOP, queue=q) for q in ("b", "a", "b")] + [envelope(NOOP, queue="c", run_at=later)])
        assert heard() == ["a", "b"]  # once per queue; the scheduled job's queue waits for its promotion
        services.enqueue([envelope(NOOP, queue="copied") for _ in range(COPY_FROM)])
        assert heard() == ["copied"]
        services.enqueue([envelope(NOOP, queue="keyed", unique_key="k")])
        assert heard() == ["keyed"]
        services.enqueue([envelope(NOOP, queue="keyed", unique_key="k") for _ in range(2)])  # duplicates only
        assert heard() == []


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
    services.pause_queue("default")
    result = add.enqueue(2, 3)
    with idle_worker():
        assert state(result.id) == "available"  # paused: the worker found nothing to start
        services.resume_queue("default")
        wait_until(lambda: state(result.id) == "completed", what="the wake-up after the resume")
    assert add.get_result(result.id).return_value == 5


def test_cancelling_a_running_job_tells_its_holder_on_the_lease_channel(live_clock):
    running = drive("running", live_clock)
    waiting = drive("available", live_clock)
    with listening(lease_channel(conf.get().NOTIFY_CHANNEL)) as heard:
        assert services.cancel(waiting.job_id) is True
        assert heard() == []  # no lease to revoke
        with transaction.atomic():
            assert services.cancel(running.job_id) is True
            assert heard() == []
        assert heard() == ["w1"]  # the worker that held it (support.start_job admits as w1)


def test_the_lease_channel_name_stays_an_identifier_postgresql_accepts(live_clock):
    long_name = "wake_" + "é" * 40  # 85 bytes: cut to fit, on a character boundary
    channel = lease_channel(long_name)
    assert channel.endswith("_lease") and len(channel.encode()) <= 63
    with listening(channel) as heard:
        wakeups.send("w9", "default", channel)
        assert heard() == ["w9"]


def test_the_listener_renews_only_for_its_own_worker_s_revocations(live_clock):
    revoked = []
    waker = Waker()
    listener = Listener(waker, "default", ["mail"], worker_id="w1", on_revoked=lambda: revoked.append(1))
    listener._heard(listener.lease_channel, "w2")
    assert revoked == [] and not waker.wait(0)
    listener._heard(listener.lease_channel, "w1")
    assert revoked == [1] and not waker.wait(0)  # the callback wakes the loop, not the listener
    listener._heard(listener.channel, "mail")
    assert revoked == [1] and waker.wait(0)
    listener._heard(listener.channel, "w1")  # a queue this worker does not serve
    assert not waker.wait(0)
