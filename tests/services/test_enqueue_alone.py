"""One envelope enqueued outside any transaction: on PostgreSQL one autocommit statement
(the PostgreSQL driver's ``insert_alone``), on SQLite the store transaction. Both must decide what the
transactional path decides, so every test here runs on committed data (no test
transaction around it) and compares with that path where it can."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

from boson_django import services, transitions
from boson_django.errors import DuplicateJobId, InvalidEnvelope
from boson_django.models import Job, Queue
from boson_django.taskresults import build_result
from tests.factories import ADD, NOOP, SEND_MAIL, envelope, enqueue_one
from tests.services.support import drive, job_row, listening, run_rows
from tests.testapp.tasks import add, rebuild_index

#: Columns a second enqueue of the same envelope may change.
OWN = {"id", "enqueued_at"}


def _same_row_both_ways(**fields) -> dict:
    """Enqueue alone and inside a transaction; the rows, but for their own ids, match."""
    alone = job_row(enqueue_one(**fields))
    with transaction.atomic():
        joined = job_row(enqueue_one(**fields))
    assert {k: v for k, v in alone.items() if k not in OWN} == {k: v for k, v in joined.items() if k not in OWN}
    return alone


def test_a_due_job_is_the_row_the_transactional_path_writes(live_clock):
    row = _same_row_both_ways(task=ADD, args=[1, 2], kwargs={}, meta={"m": [1, "\t"]}, priority=7, queue="alone")
    assert (row["state"], row["run_at"], row["enqueued_at"]) == ("available", live_clock.now(), live_clock.now())
    assert Queue.objects.filter(name="alone").exists()


def test_a_future_job_is_scheduled_like_the_transactional_path(live_clock):
    at = live_clock.now() + timedelta(milliseconds=1)
    row = _same_row_both_ways(task=NOOP, run_at=at, timeout_ms=500, rate_class="slow", weight=0.5)
    assert (row["state"], row["run_at"]) == ("scheduled", at)


def test_task_config_beats_code_defaults_and_the_envelope_beats_both(live_clock):
    services.set_task_config(SEND_MAIL, max_attempts=7, queue="mail", priority=3)
    first = job_row(enqueue_one(SEND_MAIL, args=["a@x"]))
    assert (first["max_attempts"], first["queue"], first["priority"], first["rate_class"]) == (7, "mail", 3, "smtp")
    given = job_row(enqueue_one(SEND_MAIL, args=["b@x"], max_attempts=2, queue="urgent"))
    assert (given["max_attempts"], given["queue"], given["priority"]) == (2, "urgent", 3)
    assert set(Queue.objects.values_list("name", flat=True)) == {"mail", "urgent"}  # no row for a guess
    services.set_task_config(SEND_MAIL, max_attempts=None, queue=None, priority=None, weight=4)
    later = job_row(enqueue_one(SEND_MAIL, args=["c@x"]))
    assert (later["max_attempts"], later["queue"], later["priority"], later["weight"]) == (3, "default", 0, 4.0)


def test_a_held_unique_key_is_a_duplicate_of_its_holder(live_clock):
    (first,) = services.enqueue([envelope(NOOP, unique_key="k")])
    (second,) = services.enqueue([envelope(NOOP, unique_key="k", args=[1])])
    assert (second.id, second.disposition) == (first.id, "duplicate")
    assert Job.objects.filter(unique_key="k").count() == 1
    (free,) = services.enqueue([envelope(NOOP, unique_key="k")], unique=False)
    assert free.disposition == "created" and job_row(free.id)["unique_key"] is None


def test_an_explicit_id_that_exists_raises_even_when_its_key_is_held(live_clock):
    enqueue_one(NOOP, id="taken", unique_key="held")
    with pytest.raises(DuplicateJobId, match="'taken' already exists"):
        enqueue_one(NOOP, id="taken")
    with pytest.raises(DuplicateJobId, match="'taken' already exists"):
        enqueue_one(NOOP, id="taken", unique_key="held")
    assert Job.objects.count() == 1


def test_a_quarantined_fingerprint_parks_the_job_with_its_record(live_clock):
    poisoned = drive("quarantined", live_clock)
    job_id = enqueue_one(NOOP, queue="walk")
    assert job_row(job_id)["state"] == "quarantined"
    (why,) = services.errors(job_id)
    assert why.outcome == "quarantined" and poisoned.job_id in why.error
    assert len(run_rows(job_id)) == 1


def test_bad_input_names_its_field_and_writes_nothing(live_clock):
    with pytest.raises(InvalidEnvelope, match=r"^priority: "):
        enqueue_one(NOOP, priority=101)
    with pytest.raises(InvalidEnvelope, match=r"^args\[0\]: "):
        enqueue_one(NOOP, args=[float("nan")])
    assert Job.objects.count() == 0 and Queue.objects.count() == 0


def test_an_outer_transaction_rolled_back_writes_nothing(live_clock):
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_one(NOOP, queue="gone")
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0 and Queue.objects.count() == 0


def test_observers_hear_of_the_job_once_it_is_committed(live_clock):
    heard = []
    transitions.subscribe(heard.extend)
    try:
        job_id = enqueue_one(NOOP, queue="heard")
    finally:
        transitions.unsubscribe(heard.extend)
    assert [(t.event, t.job_id, t.queue, t.state) for t in heard] == [("enqueued", job_id, "heard", "available")]


def test_the_tasks_result_is_the_one_read_back(live_clock):
    fields = ("id", "status", "enqueued_at", "started_at", "finished_at", "last_attempted_at",
              "args", "kwargs", "backend", "errors", "worker_ids")
    with transaction.atomic():
        joined = add.enqueue(5, 6)
    for result in (add.enqueue(1, 2), add.using(run_after=live_clock.now() + timedelta(hours=1)).enqueue(3, 4), joined):
        stored = build_result(result.id, "default", using="default")
        assert {f: getattr(result, f) for f in fields} == {f: getattr(stored, f) for f in fields}
        assert result.task == stored.task  # the .using() overrides, read back from the row
    first = rebuild_index.enqueue()
    assert rebuild_index.enqueue().id == first.id


@pytest.mark.postgres
def test_notify_is_sent_at_commit_and_only_for_a_created_job(live_clock):
    with listening() as heard:
        rebuild_index.enqueue()
        assert heard() == ["default"]
        rebuild_index.enqueue()  # a duplicate: nothing to wake for
        assert heard() == []
        with transaction.atomic():
            add.using(queue_name="inner").enqueue(1, 1)
            assert heard() == []
        assert heard() == ["inner"]
        with pytest.raises(RuntimeError), transaction.atomic():
            add.using(queue_name="undone").enqueue(1, 1)
            raise RuntimeError("roll back")
        assert heard() == []
    assert not Job.objects.filter(queue="undone").exists()


@pytest.mark.postgres
def test_postgres_enqueues_alone_in_one_statement_outside_django_s_cursor(live_clock):
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as alone:
        enqueue_one(NOOP, unique_key="one")
    with CaptureQueriesContext(connection) as joined, transaction.atomic():
        enqueue_one(NOOP, unique_key="two")
    assert len(alone.captured_queries) == 0 and len(joined.captured_queries) >= 2


def test_without_prepared_statements_the_statement_decides_the_same(live_clock):
    from django.conf import settings
    from django.test import override_settings

    with override_settings(BOSON={**settings.BOSON, "PREPARED_STATEMENTS": False}):
        services.set_task_config(SEND_MAIL, queue="mail")
        row = job_row(enqueue_one(SEND_MAIL, args=["a@x"], unique_key="once"))
        (again,) = services.enqueue([envelope(SEND_MAIL, args=["b@x"], unique_key="once")])
    assert (row["queue"], row["state"], again.id, again.disposition) == ("mail", "available", row["id"], "duplicate")


def test_code_defaults_follow_the_settings_in_force_from_one_call_to_the_next(live_clock, settings):
    """A task's resolved defaults are kept between calls only while the settings they came
    from are the ones in force."""
    first = job_row(enqueue_one(NOOP))
    settings.BOSON = {**settings.BOSON, "MAX_ATTEMPTS": first["max_attempts"] + 4, "RETENTION_MS": 1234}
    second = job_row(enqueue_one(NOOP))
    assert (second["max_attempts"], second["retention_ms"]) == (first["max_attempts"] + 4, 1234)
    settings.BOSON = {**settings.BOSON, "MAX_ATTEMPTS": 0}  # a bad default: an error for the jobs that rely on it
    with pytest.raises(InvalidEnvelope, match="max_attempts"):
        enqueue_one(NOOP)
    assert job_row(enqueue_one(NOOP, max_attempts=2))["max_attempts"] == 2
    services.set_task_config(NOOP, max_attempts=7)
    assert job_row(enqueue_one(NOOP))["max_attempts"] == 7
    services.set_task_config(NOOP, max_attempts=None)
    with pytest.raises(InvalidEnvelope, match="max_attempts"):
        enqueue_one(NOOP)
