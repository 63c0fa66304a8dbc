"""Admin bulk actions racing workers: each chunk of jobs the action changes commits on its own.

With ``ATOMIC_REQUESTS`` (a common project setting) a bulk action ran every service call
inside the request's one transaction: cancelling running jobs held each job's row and
its rate class's bucket until the last job was done, while a worker's ack batch held
some of those jobs and waited for the bucket. The action now cancels a chunk of jobs per
transaction, locking a chunk's jobs (in id order, as an ack batch does) before any bucket.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from boson_django import services
from boson_django.errors import ControlInterrupted
from boson_django.services import AckRequest, Outcome, control
from tests.concurrency.support import row_locked_elsewhere, run_threads
from tests.factories import NOOP, envelope

JOBS = 120
WORKERS = 3


def test_bulk_cancel_under_atomic_requests_racing_weight_corrected_acks(live_clock, monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    services.set_rate_limit("metered", limit=100_000, window_ms=1_000)
    services.enqueue([envelope(NOOP, queue="bulk", rate_class="metered") for _ in range(JOBS)])
    leases = services.admit("w", ["bulk"], JOBS)
    assert len(leases) == JOBS
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    ids = sorted(unit.lease.job_id for unit in leases)
    started = threading.Event()

    cancel_chunk = control._cancel_chunk

    def cancel_then_signal(job_ids, using=None):
        """The action's chunks: the workers start acking once the first chunk is in."""
        try:
            return cancel_chunk(job_ids, using=using)
        finally:
            started.set()

    monkeypatch.setattr(control, "CHUNK", 10)
    monkeypatch.setattr(control, "_cancel_chunk", cancel_then_signal)

    def actor(i: int) -> object:
        if i == 0:
            data = {"action": "cancel_selected", "index": 0, "_selected_action": ids}
            return client.post(reverse("admin:boson_django_job_changelist"), data).status_code
        started.wait(30)
        # From the far end of the action's id order: each batch is locked before the action gets there.
        mine = sorted((unit.lease for unit in leases[i - 1::WORKERS]), reverse=True)
        replies = []
        for start in range(0, len(mine), 2):
            batch = [AckRequest(lease, Outcome.SUCCESS, actual_weight=0.5) for lease in mine[start:start + 2]]
            replies += services.ack_many(batch)
        return replies

    results = run_threads(1 + WORKERS, actor)

    assert results[0] == 302
    acked = sum(reply.ok for replies in results[1:] for reply in replies)
    counts = services.counts("bulk")
    assert counts["cancelled"] + counts["completed"] == JOBS
    assert counts["completed"] == acked
    problems = services.find_problems()
    assert not problems, [str(p) for p in problems]


@contextmanager
def _row_locked_elsewhere(job_id: str):
    """Hold ``job_id``'s row lock from another connection, with this one's lock_timeout short."""
    with row_locked_elsewhere("boson_job", "id", job_id):
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")


def _five_held_jobs(monkeypatch) -> list[str]:
    services.pause_queue("held")
    monkeypatch.setattr(control, "CHUNK", 2)
    return sorted(r.id for r in services.enqueue([envelope(NOOP, queue="held") for _ in range(5)]))


@pytest.mark.postgres
def test_a_bulk_cancel_stopped_by_a_lock_timeout_reports_and_logs_what_committed(live_clock, monkeypatch):
    """Each chunk commits on its own: an error in a later one must not hide the earlier
    ones (it answered 500 with 2 chunks applied, no message and no history)."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.messages import get_messages

    ids = _five_held_jobs(monkeypatch)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    with _row_locked_elsewhere(ids[3]):
        data = {"action": "cancel_selected", "index": 0, "_selected_action": ids}
        response = client.post(reverse("admin:boson_django_job_changelist"), data, follow=True)
    (said,) = [str(m) for m in get_messages(response.wsgi_request)]
    assert said.startswith("2 cancelled, then a database error stopped it (") and said.endswith(
        "3 not reached, run it again"), said
    assert [services.job_state(i)[1] for i in ids] == ["cancelled"] * 2 + ["available"] * 3
    assert sorted(LogEntry.objects.values_list("object_id", flat=True)) == ids[:2]


@pytest.mark.postgres
def test_inside_a_callers_transaction_an_interrupted_control_leaves_it_usable(live_clock, monkeypatch):
    """Each chunk is a savepoint there: the error rolls back only its own chunk, the earlier
    ones stay pending and go with the caller's transaction (here rolled back)."""
    ids = _five_held_jobs(monkeypatch)
    with _row_locked_elsewhere(ids[3]):
        with pytest.raises(RuntimeError, match="caller rolls back"):
            with transaction.atomic():
                with pytest.raises(ControlInterrupted) as stopped:
                    services.cancel_jobs(ids)
                assert (stopped.value.result.done, stopped.value.not_reached) == (ids[:2], ids[2:])
                assert [services.job_state(i)[1] for i in ids] == ["cancelled"] * 2 + ["available"] * 3
                raise RuntimeError("caller rolls back")
    assert [services.job_state(i)[1] for i in ids] == ["available"] * 5
