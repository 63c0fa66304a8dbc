"""Boson's policies, set in code and edited in the admin (Django's test client posting the
real forms), as a running worker sees them. No worker keeps a policy in memory: every
admission that starts after a change commits decides with it, and a change that may let
jobs through wakes idle workers at its commit. Time on the store clock is frozen and
stepped, never waited for."""

from __future__ import annotations

import pathlib
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from boson_django import services
from boson_django.models import Job, Queue, TaskConfig
from tests.admin.conftest import staff_client
from tests.testapp.tasks import add, fail, gated, reports_weight, send_mail
from tests.worker.conftest import ThreadWorker, burst, idle_worker, wait_until

GATED = "tests.testapp.tasks.gated"
FAIL = "tests.testapp.tasks.fail"
SEND_MAIL = "tests.testapp.tasks.send_mail"
MS = timedelta(milliseconds=1)
TUNER = ["view_taskconfig", "add_taskconfig", "change_taskconfig", "delete_taskconfig", "view_bucket",
         "tune_rate_limit", "delete_bucket", "view_queue", "operate_queue"]


class Admissions:
    """Numbers a worker's admissions and records which of them claimed jobs (install
    before the worker starts)."""

    def __init__(self, runner: ThreadWorker):
        self.count = 0
        self.claims: list[tuple[int, int]] = []  # (admission number, jobs claimed)
        admit = runner.worker.admission.admit

        def numbered() -> tuple[int, int]:
            self.count += 1
            number = self.count
            asked, got = admit()
            if got:
                self.claims.append((number, got))
            return asked, got

        runner.worker.admission.admit = numbered  # type: ignore[method-assign]

    def pass_some(self, n: int = 3) -> None:
        """Let ``n`` more admissions run."""
        target = self.count + n
        wait_until(lambda: self.count >= target, what=f"{n} more admissions")

    def around(self, change: Any) -> tuple[int, int]:
        """Make the change; the admissions counted before it and once it returned (it
        committed before returning, so every admission numbered past the second began
        after the commit)."""
        before = self.count
        change()
        return before, self.count

    def first_claim_since(self, number: int) -> int:
        return min(n for n, _ in self.claims if n >= number)


def started(folder: pathlib.Path) -> int:
    return len(list(folder.glob("started-*")))


def post(client: Any, url: str, data: dict[str, Any]) -> Any:
    response = client.post(url, data)
    assert response.status_code == 302, response.content[:3000]
    return response


def change_url(model: str, pk: str) -> str:
    return reverse(f"admin:boson_django_{model}_change", args=[quote(pk)])


def add_url(model: str) -> str:
    return reverse(f"admin:boson_django_{model}_add")


@pytest.fixture
def tuner(live_clock: Any) -> Any:
    """Staff allowed to view and tune task configs, buckets and queues (nothing else)."""
    return staff_client("tuner", TUNER)


def test_max_active_edited_in_the_admin_is_seen_by_the_next_admission_of_a_running_worker(tuner, folder):
    post(tuner, add_url("taskconfig"), {"task": GATED, "max_active": 1})
    for n in range(3):
        gated.using(queue_name="capped").enqueue(str(folder), n)
    runner = ThreadWorker(queues=["capped"], concurrency=3)
    admissions = Admissions(runner)
    with runner:
        wait_until(lambda: started(folder) == 1, what="the first job")
        admissions.pass_some()
        assert started(folder) == 1 and Job.objects.filter(state="running").count() == 1
        before, after = admissions.around(lambda: post(tuner, change_url("taskconfig", GATED), {"max_active": 3}))
        wait_until(lambda: started(folder) == 3, what="the two jobs the cap held back")
        assert admissions.first_claim_since(before) <= after + 1, "an admission begun after the change missed it"
        (folder / "go").write_text("go")
        wait_until(lambda: Job.objects.filter(state="completed").count() == 3, what="the jobs to complete")


def test_a_queue_paused_and_resumed_in_the_admin_is_seen_by_a_running_worker(tuner, folder):
    gated.using(queue_name="lane").enqueue(str(folder), 0)
    runner = ThreadWorker(queues=["lane"], concurrency=2)
    admissions = Admissions(runner)
    with runner:
        wait_until(lambda: started(folder) == 1, what="the first job")
        viewer = staff_client("viewer", ["view_queue"])
        assert viewer.post(reverse("admin:boson_django_queue_op", args=["lane", "pause"])).status_code == 403
        assert not Queue.objects.get(name="lane").paused
        post(tuner, reverse("admin:boson_django_queue_op", args=["lane", "pause"]), {})
        gated.using(queue_name="lane").enqueue(str(folder), 1)
        admissions.pass_some()
        assert started(folder) == 1 and len(admissions.claims) == 1, "a paused queue's job was started"
        resume = reverse("admin:boson_django_queue_op", args=["lane", "resume"])
        before, after = admissions.around(lambda: post(tuner, resume, {}))
        wait_until(lambda: started(folder) == 2, what="the job of the resumed queue")
        assert admissions.first_claim_since(before) <= after + 1, "an admission begun after the resume missed it"
        (folder / "go").write_text("go")


def test_a_bucket_retuned_in_the_admin_refills_at_its_new_rate_for_a_running_worker(tuner, folder, live_clock):
    """The jobs' rate class comes from the admin's task config, the bucket from its
    Buckets page; a retune keeps the tokens (none left here) and refills at the new rate."""
    post(tuner, add_url("bucket"), {"name": "lane-rate", "limit": 1, "window_ms": 60_000, "burst": 0})
    post(tuner, add_url("taskconfig"), {"task": GATED, "rate_class": "lane-rate", "lease_ms": 3_600_000})
    for n in range(3):
        gated.using(queue_name="metered").enqueue(str(folder), n)
    runner = ThreadWorker(queues=["metered"], concurrency=3)
    admissions = Admissions(runner)
    with runner:
        wait_until(lambda: started(folder) == 1, what="the job the full bucket pays for")
        post(tuner, change_url("bucket", "lane-rate"), {"limit": 3, "window_ms": 60_000, "burst": 0})
        admissions.pass_some()
        assert started(folder) == 1, "a retune added tokens"
        live_clock.advance(20_000)  # one token at 3 a minute (the old rate needed 60 s)
        wait_until(lambda: started(folder) == 2, what="the job of the refilled token")
        admissions.pass_some()
        assert started(folder) == 2
        live_clock.advance(20_000)
        wait_until(lambda: started(folder) == 3, what="the job of the next token")
        (folder / "go").write_text("go")


def test_policy_precedence_through_the_admin_and_back_to_the_code_defaults(tuner):
    """BOSON settings, then ``@task`` defaults, then the admin's row, then ``.using``; the
    row deleted in the admin, later jobs take the code defaults again while the jobs
    already queued keep what they were enqueued with."""

    def policy(result: Any) -> tuple[Any, ...]:
        job = Job.objects.get(id=result.id)
        return job.max_attempts, job.weight, job.rate_class, job.retention_ms, job.queue, job.priority

    assert policy(send_mail.enqueue("a@x")) == (3, 2.0, "smtp", 86_400_000, "default", 0)  # code, then BOSON
    post(tuner, add_url("taskconfig"), {"task": SEND_MAIL, "max_attempts": 7, "weight": 0.5, "rate_class": "bulk",
                                        "retention_ms": 0, "queue": "mail", "priority": 5})
    queued = send_mail.enqueue("b@x")
    assert policy(queued) == (7, 0.5, "bulk", 0, "mail", 5)
    assert policy(send_mail.using(max_attempts=9, priority=50).enqueue("c@x")) == (9, 0.5, "bulk", 0, "mail", 50)
    post(tuner, reverse("admin:boson_django_taskconfig_delete", args=[quote(SEND_MAIL)]), {"post": "yes"})
    assert not TaskConfig.objects.exists()
    assert policy(send_mail.enqueue("d@x")) == (3, 2.0, "smtp", 86_400_000, "default", 0)
    assert policy(queued) == (7, 0.5, "bulk", 0, "mail", 5)


def test_retries_edited_in_the_admin_bound_a_worker_s_attempts_on_the_store_clock(tuner, live_clock):
    post(tuner, add_url("taskconfig"), {"task": FAIL, "max_attempts": 2})
    job_id = fail.enqueue("boom").id
    burst()
    job = Job.objects.get(id=job_id)
    assert (job.state, job.attempt) == ("retryable", 1)
    assert (job.run_at - live_clock.now()) // MS <= 1_000  # RETRY_BASE_MS bounds the first
    burst()
    assert Job.objects.get(id=job_id).state == "retryable", "ran before its backoff was over"
    live_clock.advance(1_000)
    burst()
    job = Job.objects.get(id=job_id)
    assert (job.state, job.attempt) == ("failed", 2)


def test_a_handler_reports_its_actual_weight_and_the_worker_s_ack_corrects_the_charge(live_clock):
    services.set_rate_limit("metered", limit=20, window_ms=86_400_000)
    ids = [reports_weight.enqueue(actual).id for actual in (1, 0, 2.5)]
    burst()
    assert services.bucket_tokens("metered") == pytest.approx(20 - 3.5)
    assert [Job.objects.get(id=i).charged_weight for i in ids] == pytest.approx([1, 0, 2.5])


def test_a_bad_actual_weight_fails_the_attempt_naming_the_field_and_keeps_the_estimate(live_clock):
    from boson_django.testing import run_until_idle

    services.set_rate_limit("metered", limit=20, window_ms=86_400_000)
    job_id = reports_weight.enqueue(-1).id
    assert run_until_idle() == 1
    job = Job.objects.get(id=job_id)
    assert job.state == "retryable" and "actual_weight" in job.last_error
    assert job.charged_weight == 5 and services.bucket_tokens("metered") == pytest.approx(15)


def test_a_timeout_and_a_retention_edited_in_the_admin_apply_to_a_running_worker_s_job(tuner, folder, live_clock):
    post(tuner, add_url("taskconfig"), {"task": GATED, "timeout_ms": 1_000, "max_attempts": 1, "retention_ms": 5_000})
    job_id = gated.using(queue_name="timed").enqueue(str(folder), 0).id
    with ThreadWorker(queues=["timed"]):
        wait_until(lambda: started(folder) == 1, what="the job")
        live_clock.advance(1_000)  # its deadline on the store clock
        wait_until(lambda: Job.objects.get(id=job_id).state == "failed", what="the timeout")
    assert "TaskTimeout" in Job.objects.get(id=job_id).last_error
    live_clock.advance(4_999)
    burst()  # its sweeps evict what is due
    assert Job.objects.filter(id=job_id).exists()
    live_clock.advance(1)
    burst()
    assert not Job.objects.filter(id=job_id).exists()


def test_a_crash_limit_and_a_lease_edited_in_the_admin_quarantine_a_job_its_worker_died_holding(tuner, live_clock):
    post(tuner, add_url("taskconfig"), {"task": "tests.testapp.tasks.add", "crash_limit": 1, "lease_ms": 5_000})
    job_id = add.enqueue(1, 2).id
    services.admit("died-holding-it", [], 1)  # a worker that never renews nor acks
    live_clock.advance(4_999)
    burst()  # its sweeps reclaim what has expired: nothing yet
    assert Job.objects.get(id=job_id).state == "running"
    live_clock.advance(1)
    burst()
    job = Job.objects.get(id=job_id)
    assert (job.state, job.crash_attempt) == ("quarantined", 1)
    assert services.job_state(add.enqueue(1, 2).id)[1] == "quarantined", "the same call parks beside it"


def test_uniqueness_edited_in_the_admin_merges_calls_a_worker_has_not_run_yet(tuner, live_clock):
    post(tuner, add_url("taskconfig"), {"task": "tests.testapp.tasks.add", "uniqueness": "arguments"})
    first = add.enqueue(1, 2).id
    assert add.enqueue(1, 2).id == first
    assert add.enqueue(2, 2).id != first
    burst()
    assert Job.objects.get(id=first).state == "completed"
    assert add.enqueue(1, 2).id != first, "a finished job holds no key"
    post(tuner, change_url("taskconfig", "tests.testapp.tasks.add"), {"uniqueness": "off"})
    assert add.enqueue(5, 5).id != add.enqueue(5, 5).id


def test_the_test_helper_s_ack_corrects_the_charge_with_the_reported_weight_too(live_clock):
    """``boson_django.testing.run_until_idle`` acks through the worker's own delivery."""
    from boson_django.testing import run_until_idle

    services.set_rate_limit("metered", limit=20, window_ms=86_400_000)
    job_id = reports_weight.enqueue(0).id
    assert run_until_idle() == 1
    assert Job.objects.get(id=job_id).charged_weight == 0 and services.bucket_tokens("metered") == pytest.approx(20)


def test_retry_backoff_settings_bound_each_wait_a_worker_sets_on_the_store_clock(live_clock, settings):
    """RETRY_BASE_MS bounds the first retry's wait, doubling per attempt up to RETRY_CAP_MS;
    the jitter keeps each wait in the upper half of its bound."""
    settings.BOSON = {**settings.BOSON, "RETRY_BASE_MS": 4_000, "RETRY_CAP_MS": 10_000}
    job_id = fail.using(max_attempts=5).enqueue("again").id
    waits = []
    for _ in range(4):
        burst()
        job = Job.objects.get(id=job_id)
        waits.append((job.run_at - live_clock.now()) // MS)  # whole milliseconds, as the worker set them
        live_clock.advance(waits[-1])
    bounds = [4_000, 8_000, 10_000, 10_000]
    assert all(bound / 2 <= wait <= bound for wait, bound in zip(waits, bounds)), waits
    burst()
    assert Job.objects.get(id=job_id).state == "failed"


def test_an_idle_worker_admits_at_once_what_an_admin_edit_lets_through(tuner, folder):
    """A worker that would not poll, sweep nor beat for ten minutes: only a wake-up at the
    edit's commit can start the jobs a raised cap or a deleted bucket let through."""
    post(tuner, add_url("taskconfig"), {"task": GATED, "max_active": 1, "lease_ms": 3_600_000})
    services.set_rate_limit("idle-rate", limit=1, window_ms=3_600_000)
    held = [gated.using(queue_name="idle").enqueue(str(folder), n).id for n in range(2)]
    limited = [add.using(rate_class="idle-rate", queue_name="idle").enqueue(n, n).id for n in range(2)]
    with idle_worker(HEARTBEAT_MS=600_000) as runner:
        assert runner.worker.concurrency >= 4
        wait_until(lambda: Job.objects.filter(id__in=limited, state="completed").count() == 1, what="the paid-for job")
        assert started(folder) == 1 and Job.objects.filter(id__in=[*held, *limited], state="available").count() == 2
        post(tuner, change_url("taskconfig", GATED), {"max_active": 2, "lease_ms": 3_600_000})
        wait_until(lambda: started(folder) == 2, timeout=5, what="the job the raised cap lets through")
        post(tuner, reverse("admin:boson_django_bucket_delete", args=["idle-rate"]), {"post": "yes"})
        wait_until(lambda: Job.objects.filter(id__in=limited, state="completed").count() == 2, timeout=5,
                   what="the job of the class with no bucket any more")
        (folder / "go").write_text("go")
        wait_until(lambda: Job.objects.filter(id__in=held, state="completed").count() == 2, what="the gated jobs")
