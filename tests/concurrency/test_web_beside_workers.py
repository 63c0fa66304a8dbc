"""A web process and an operator beside real ``boson_worker`` processes on one store.

The web side enqueues the three ways a Django view does -- inside its own
``transaction.atomic()``, through the Tasks API outside one, through
``services.enqueue`` -- from two threads, while an operator cancels and retries jobs
from a third and three worker processes drain. On SQLite that is one write lock wanted
by six processes' connections at once: nothing may fail with "database is locked",
reach a worker's log as a traceback, or lose or double a job.
"""

from __future__ import annotations

import queue
import signal

import pytest
from django.db import transaction

from boson_django import services
from boson_django.models import Job, Run
from tests.concurrency.support import run_threads
from tests.factories import NOOP, envelope
from tests.faults.support import Worker, wait_until
from tests.testapp.tasks import noop

WORKERS = 3
WEB_THREADS = 2
PER_THREAD = 90  # a third each way
LIVE = ("scheduled", "available", "running", "retryable")


def _enqueue(way: int) -> str:
    if way == 0:
        with transaction.atomic():  # a view's own transaction: the enqueue joins it
            return noop.enqueue().id
    if way == 1:
        return noop.enqueue().id
    return services.enqueue([envelope(NOOP)])[0].id


class Operator:
    """Acts on the jobs as the web threads hand them over: cancels every fourth (running
    or not, whichever it is by then) and retries every eighth right after its cancel."""

    def __init__(self) -> None:
        self.handed: queue.Queue[str] = queue.Queue()
        self.touched: set[str] = set()

    def run(self, count: int) -> None:
        for n in range(count):
            job_id = self.handed.get(timeout=60)
            if n % 4:
                continue
            self.touched.add(job_id)
            services.cancel_jobs([job_id])
            if n % 8 == 0:
                services.retry_jobs([job_id])


@pytest.mark.slow
def test_web_enqueues_and_operator_controls_beside_three_workers_lose_and_double_nothing(live_clock, tmp_path):
    operator = Operator()
    enqueued: list[str] = []

    def body(i: int) -> None:
        if i == WEB_THREADS:
            return operator.run(WEB_THREADS * PER_THREAD)
        for n in range(PER_THREAD):
            job_id = _enqueue(n % 3)
            enqueued.append(job_id)
            operator.handed.put(job_id)
        return None

    procs = [Worker(tmp_path, f"web-w{i}", "--concurrency", "4") for i in range(WORKERS)]
    try:
        for proc in procs:  # all three draining from the first enqueue (and past Django's set-up for SIGTERM)
            proc.wait_for_line(f"worker {proc.name} up")
        run_threads(WEB_THREADS + 1, body)
        wait_until(lambda: not Job.objects.filter(id__in=enqueued, state__in=LIVE).exists(), 60,
                   what="the workers to drain every job")
        for proc in procs:
            proc.signal(signal.SIGTERM)
        codes = [proc.exit_code() for proc in procs]
    finally:
        for proc in procs:
            proc.cleanup()

    assert codes == [0] * WORKERS, [proc.text()[-2_000:] for proc in procs]
    for proc in procs:
        assert "locked" not in proc.text().lower() and "Traceback" not in proc.text(), proc.text()[-4_000:]
    assert len(set(enqueued)) == WEB_THREADS * PER_THREAD
    states = dict(Job.objects.filter(id__in=enqueued).values_list("id", "state"))
    untouched = set(enqueued) - operator.touched
    assert {states[i] for i in untouched} == {"completed"}
    assert {states[i] for i in operator.touched} <= {"completed", "cancelled"}
    successes = list(Run.objects.filter(job_id__in=enqueued, outcome="success").values_list("job_id", flat=True))
    assert len(successes) == len(set(successes)), "a job completed twice"
    assert untouched <= set(successes)
    assert services.find_problems() == []
