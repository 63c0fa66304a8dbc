"""The many-id controls the admin's bulk actions call: each id's fate reported, a chunk of
jobs per transaction, and the one-id controls as the same code applied to one id."""

from __future__ import annotations

import pytest
from django.db import connection

from boson_django import services
from boson_django.models import Job, Run
from boson_django.services import Outcome, control
from tests.factories import ADD, admit_one, enqueue_one, state_of
from tests.services.support import sqlite_binding_at_most


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


def test_many_jobs_go_a_chunk_per_transaction(live_clock, monkeypatch):
    """Each chunk commits on its own: outside any atomic block when it starts and ends."""
    monkeypatch.setattr(control, "CHUNK", 2)
    ids = [_failed() for _ in range(5)]
    chunks, outside = [], []
    real = control._retry_chunk

    def counted(chunk, using=None):
        outside.append(not connection.in_atomic_block)
        chunks.append(list(chunk))
        result = real(chunk, using=using)
        outside.append(not connection.in_atomic_block)
        return result

    monkeypatch.setattr(control, "_retry_chunk", counted)
    result = services.retry_jobs(ids)
    assert result.done == ids
    assert [len(c) for c in chunks] == [2, 2, 1]
    assert outside == [True] * 6
    assert Run.objects.filter(job_id__in=ids, outcome="retried").count() == 5


def test_a_release_chunk_is_sized_by_the_jobs_it_frees(store_clock, monkeypatch):
    """Two fingerprints of three quarantined jobs each are two chunks of three, not one
    chunk of two ids (a chunk of ids could lock any number of parked copies)."""
    monkeypatch.setattr(control, "CHUNK", 3)
    first, _ = _quarantined_with_copies(store_clock, copies=2, args=(1, 2))
    second, _ = _quarantined_with_copies(store_clock, copies=2, args=(3, 4))
    chunks = []
    real = control._release_chunk
    monkeypatch.setattr(control, "_release_chunk", lambda asked, using=None: chunks.append(dict(asked)) or real(asked, using=using))
    result = services.release_jobs([first, second])
    assert (sorted(result.done), result.also) == (sorted([first, second]), 4)
    assert [len(c) for c in chunks] == [1, 1]


def test_a_job_evicted_before_its_release_chunk_is_reported_unknown(store_clock, monkeypatch):
    first, _ = _quarantined_with_copies(store_clock, copies=1)
    real = control._release_chunk

    def evicted_first(asked, using=None):
        Job.objects.filter(id=first).delete()
        return real(asked, using=using)

    monkeypatch.setattr(control, "_release_chunk", evicted_first)
    result = services.release_jobs([first])
    assert (result.done, result.refused, result.unknown) == ([], [], [first])


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


def test_a_cancel_of_more_running_jobs_than_sqlite_binds_goes_in_chunks_it_can(store_clock):
    """A chunk of 500 running jobs closed their runs by job and fence: 1,003 parameters,
    past the 999 of SQLite before 3.32, and the cancel stopped at its first chunk."""
    ids = [enqueue_one(queue="bound") for _ in range(control.CHUNK)]
    assert len(services.admit("w1", ["bound"], control.CHUNK)) == control.CHUNK
    with sqlite_binding_at_most():
        done = services.cancel_jobs(ids)
    assert sorted(done.done) == sorted(ids)
    assert {state_of(i) for i in ids} == {"cancelled"}
    assert Run.objects.filter(job_id__in=ids, finished_at__isnull=True).count() == 0
