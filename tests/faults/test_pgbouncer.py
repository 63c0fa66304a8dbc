"""Through a real PgBouncer (tests/faults/pgbouncer.py), workers and clients in
subprocesses, the test's own checks on PostgreSQL directly.

Transaction pooling, configured as docs/workers.md says (``POOLER = "transaction"``,
poll-only workers, nothing prepared): enqueue and drain, a SIGKILLed worker's job
reclaimed, schedules firing, the admin; a worker left with NOTIFY on polls and says why.
Session pooling: LISTEN/NOTIFY wakes an idle worker through the pooler.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection

from boson_django import services
from boson_django.models import Job, ScheduleSlot
from tests.faults.checker import assert_sound, effects_of, starts_of
from tests.faults.pgbouncer import PgBouncer
from tests.faults.support import ROOT, enqueue_many, fault_env, wait_file, wait_until
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

EFFECT = "tests.testapp.fault_tasks.effect"
LEASE_MS = 5_000

#: Enqueues ``argv[1]`` jobs one at a time (each its own one-statement enqueue) through
#: Django's Tasks API; prints their ids.
ENQUEUE = """
import sys
from tests.testapp.tasks import add
print(" ".join(add.enqueue(2, 3).id for _ in range(int(sys.argv[1]))))
"""

#: The admin's pages, rendered by a process whose every query goes through the pooler.
ADMIN = """
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from django.urls import reverse
from tests.testapp.tasks import add

setup_test_environment()
user = get_user_model().objects.create_superuser("pooled", "pooled@example.com", "pooled")
job = add.enqueue(1, 2)
client = Client()
client.force_login(user)
urls = ["/admin/", "/admin/boson_django/", reverse("admin:boson_django_job_changelist"),
        reverse("admin:boson_django_job_change", args=[job.id]), reverse("admin:boson_django_storedschedule_changelist")]
for url in urls:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
print("admin pages:", len(urls))
"""


@pytest.fixture(scope="module")
def bouncers():
    """``bouncers(mode)``: this module's PgBouncer in that pool mode, started once."""
    started: dict[str, PgBouncer] = {}
    server = settings.DATABASES["default"]

    def get(mode: str) -> PgBouncer:
        if mode not in started:
            started[mode] = PgBouncer(mode, server.get("HOST", ""), server.get("PORT", "")).start()
        return started[mode]

    yield get
    for bouncer in started.values():
        bouncer.stop()


def pooled_env(bouncer: PgBouncer, **extra: str) -> dict[str, str]:
    return fault_env(DJANGO_SETTINGS_MODULE="tests.faults.pooled_settings", **bouncer.env(), **extra)


def run_client(bouncer: PgBouncer, script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + script, *args],
                          env=pooled_env(bouncer), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def database() -> str:
    return connection.settings_dict["NAME"]


def transactions(bouncer: PgBouncer) -> int:
    return bouncer.stats(database())["total_xact_count"]


def listening_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN %%'",
                       [database()])
        return int(cursor.fetchone()[0])


def stop(worker) -> None:
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    assert "Traceback" not in worker.text(), worker.text()


def test_transaction_pooling_enqueue_and_drain_with_a_poll_only_worker(live_clock, bouncers, workers):
    bouncer = bouncers("transaction")
    before = transactions(bouncer)
    worker = workers("w-pooled", "--concurrency", "4", env=pooled_env(bouncer))
    worker.wait_for_line("poll only")
    ids = run_client(bouncer, ENQUEUE, "30").split()
    assert len(ids) == 30
    wait_until(lambda: services.counts().get("completed") == 30, 60, what="30 jobs to complete through PgBouncer")
    stop(worker)
    assert all(services.get_result(job_id).data == 5 for job_id in ids)
    assert transactions(bouncer) - before >= 60, "the enqueues and the worker did not go through PgBouncer"
    assert listening_sessions() == 0
    assert_sound(ids)


def test_transaction_pooling_a_sigkilled_workers_job_is_reclaimed_and_run_again(live_clock, tmp_path, bouncers, workers):
    bouncer = bouncers("transaction")
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    doomed = workers("w-pooled-doomed", env=pooled_env(bouncer))
    wait_file(tmp_path, f"started-{job_id}-1")
    doomed.kill()
    assert Job.objects.get(id=job_id).state == "running"
    live_clock.advance(LEASE_MS + 1)
    (tmp_path / "go").write_text("go")
    rescuer = workers("w-pooled-rescuer", env=pooled_env(bouncer))  # its sweeps reclaim the lease
    wait_until(lambda: Job.objects.get(id=job_id).state == "completed", 60, what="the reclaimed job to complete")
    stop(rescuer)
    job = Job.objects.get(id=job_id)
    assert (job.attempt, job.crash_attempt, job.fence) == (1, 1, 2)
    assert effects_of(job_id) == [2] and starts_of(job_id) == [1, 2]
    assert_sound([job_id])


def test_transaction_pooling_schedules_fire_once_per_slot(live_clock, bouncers, workers):
    bouncer = bouncers("transaction")
    worker = workers("w-pooled-scheduler", env=pooled_env(bouncer, BOSON_TEST_SCHEDULE="1"))
    slots = ScheduleSlot.objects.filter(schedule="pooled-minute")
    from boson_django.models import StoredSchedule

    wait_until(lambda: StoredSchedule.objects.filter(name="pooled-minute").exists(), 30, what="the schedule to sync")
    for minute in (1, 2):
        live_clock.advance(60_000)
        wait_until(lambda m=minute: slots.count() == m, 30, what=f"slot {minute} to fire")
    wait_until(lambda: services.counts().get("completed") == 2, 30, what="both scheduled jobs to run")
    stop(worker)
    assert len({slot.job_id for slot in slots}) == 2


def test_transaction_pooling_the_admin_renders(transactional_db, bouncers):
    bouncer = bouncers("transaction")
    before = transactions(bouncer)
    assert run_client(bouncer, ADMIN).strip() == "admin pages: 5"
    assert transactions(bouncer) > before


def test_transaction_pooling_with_notify_left_on_the_worker_polls_and_says_why(live_clock, bouncers, workers):
    bouncer = bouncers("transaction")
    worker = workers("w-pooled-notify", env=pooled_env(bouncer, BOSON_TEST_NOTIFY="1"))
    worker.wait_for_line("LISTEN needs a session of its own")
    ids = run_client(bouncer, ENQUEUE, "5").split()  # they still NOTIFY: a direct listener would hear them
    wait_until(lambda: services.counts().get("completed") == 5, 60, what="5 jobs to complete")
    assert listening_sessions() == 0
    stop(worker)
    assert worker.text().count("LISTEN needs a session") == 1 and "poll only" in worker.text()
    assert_sound(ids)


def test_session_pooling_notify_wakes_an_idle_worker_through_the_pooler(live_clock, bouncers, workers):
    """The worker polls every 10 minutes and sweeps every minute: only a notification can
    start the jobs within the wait below."""
    bouncer = bouncers("session")
    started = time.monotonic()
    worker = workers("w-pooled-listener", "--poll-interval-ms", "600000",
                     env=pooled_env(bouncer, BOSON_TEST_SLEEPY="1"))
    worker.wait_for_line("notify)")
    wait_until(lambda: listening_sessions() == 1, 30, what="the worker's LISTEN through PgBouncer")
    ids = run_client(bouncer, ENQUEUE, "3").split()
    wait_until(lambda: services.counts().get("completed") == 3, 30, what="the notified worker to run 3 jobs")
    assert time.monotonic() - started < 55, "too slow to tell a notification from the next sweep"
    stop(worker)
    assert_sound(ids)
