"""The many-id controls the admin's bulk actions call: each id's fate reported, a chunk of
jobs per transaction, and the one-id controls as the same code applied to one id."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.models import Run
from boson_django.services import Outcome, control
from tests.factories import ADD, admit_one, enqueue_one, state_of


def _failed(queue: str = "many", **fields) -> str:
    job_id = enqueue_one(queue=queue, max_attempts=1, **fields)
    unit = admit_one("w1", [queue])
    services.ack(unit.lease, Outcome.RETRY, error="boom")
    return job_id


def _quarantined_with_copies(store_clock, copies: int, args=(1, 2)) -> tuple[str, list[str]]:
    """A job quarantined by a crash, and ``copies`` later enqueues parked beside it."""
    services.set_task_config(ADD, crash_limit=1)
    first = enqueue_one(ADD, queue="poison", lease_ms=1000, args=list(args))
    admit_one("w1", ["poison"])
    store_clock.advance(1001)
    services.reclaim_expired(100)
    parked = [enqueue_one(ADD, queue="poison", args=list(args), unique_key=None) for _ in range(copies)]
    assert {state_of(j) for j in [first, *parked]} == {"quarantined"}
    return first, parked


def test_retry_jobs_reports_each_id_by_what_happened(store_clock):
    failed = _failed()
    held = _failed(unique_key="k1")
    enqueue_one(queue="other", unique_key="k1")  # a newer live job takes the key
    live = enqueue_one(queue="other")
    result = services.retry_jobs([failed, held, live, "no-such-job"])
    assert (result.done, result.key_held, result.refused, result.unknown) == ([failed], [held], [live], ["no-such-job"])
    assert state_of(failed) == "available" and state_of(held) == "failed"


def test_release_jobs_counts_the_parked_copies_released_with_a_job(store_clock):
    first, parked = _quarantined_with_copies(store_clock, copies=2)
    result = services.release_jobs([first])
    assert (result.done, result.also) == ([first], 2)
    assert {state_of(j) for j in [first, *parked]} == {"available"}


def test_releasing_a_job_and_its_copies_together_counts_each_once(store_clock, monkeypatch):
    """Even when the ids would span chunks: a fingerprint's ids stay in one chunk."""
    monkeypatch.setattr(control, "CHUNK", 1)
    first, parked = _quarantined_with_copies(store_clock, copies=2)
    result = services.release_jobs([parked[1], first])
    assert (sorted(result.done), result.also, result.refused) == (sorted([parked[1], first]), 1, [])


def test_many_jobs_go_a_chunk_per_transaction(store_clock, monkeypatch):
    monkeypatch.setattr(control, "CHUNK", 2)
    ids = [_failed() for _ in range(5)]
    commits = []
    real = control._retry_chunk
    monkeypatch.setattr(control, "_retry_chunk", lambda chunk, using=None: commits.append(list(chunk)) or real(chunk, using=using))
    result = services.retry_jobs(ids)
    assert result.done == ids
    assert [len(c) for c in commits] == [2, 2, 1]
    assert Run.objects.filter(job_id__in=ids, outcome="retried").count() == 5


def test_a_repeated_id_is_controlled_once(store_clock):
    job_id = _failed()
    assert services.retry_jobs([job_id, job_id]).done == [job_id]


def test_cancel_jobs_cancels_waiting_and_running_jobs_at_once(store_clock):
    waiting = enqueue_one(queue="many")
    running = enqueue_one(queue="busy")
    admit_one("w1", ["busy"])
    result = services.cancel_jobs([waiting, running])
    assert sorted(result.done) == sorted([waiting, running])
    assert state_of(waiting) == state_of(running) == "cancelled"
    assert Run.objects.get(job_id=running).outcome == "cancelled"


@pytest.mark.parametrize("bad", ["", "x" * 65])
def test_a_bad_id_is_refused_before_anything_is_written(store_clock, bad):
    job_id = _failed()
    with pytest.raises(ValueError):
        services.retry_jobs([job_id, bad])
    assert state_of(job_id) == "failed"
