"""The TaskConfig ``uniqueness`` switch (code, admin): ``off`` drops the unique key the
code gives, ``arguments`` makes a keyless task unique by task and arguments; both on the
one-job path, a batch and the Tasks backend, and only for jobs enqueued afterwards."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job, TaskConfig
from boson_django.services import Envelope, Outcome
from tests.factories import ADD, admit_one
from tests.testapp.tasks import add, rebuild_index

REBUILD = "tests.testapp.tasks.rebuild_index"


def test_off_drops_the_code_s_key_for_jobs_enqueued_afterwards(store_clock):
    before = rebuild_index.enqueue()
    assert rebuild_index.enqueue().id == before.id  # the code's static key
    services.set_task_config(REBUILD, uniqueness="off")
    first, second = rebuild_index.enqueue(), rebuild_index.enqueue()
    assert len({before.id, first.id, second.id}) == 3
    assert Job.objects.get(id=first.id).unique_key is None
    assert Job.objects.get(id=before.id).unique_key == "reindex", "a job's policy is fixed at enqueue"
    services.set_task_config(REBUILD, uniqueness=None)  # back to the code
    assert rebuild_index.enqueue().id == before.id


def test_arguments_makes_a_keyless_task_unique_per_call_while_a_job_holds_it(store_clock):
    services.set_task_config(ADD, uniqueness="arguments")
    one = add.enqueue(1, 2)
    assert add.enqueue(1, 2).id == one.id
    other = add.enqueue(2, 1)
    assert other.id != one.id
    assert Job.objects.get(id=one.id).unique_key == f"fingerprint:{Job.objects.get(id=one.id).fingerprint}"
    services.ack(admit_one("w1", ["default"]).lease, Outcome.SUCCESS)  # the older call finishes
    assert add.enqueue(1, 2).id != one.id, "a finished job no longer holds its key"


def test_arguments_in_one_batch_and_a_key_of_the_call_s_own_kept(store_clock):
    services.set_task_config(ADD, uniqueness="arguments")
    results = services.enqueue([Envelope(task=ADD, args=[5, 5]), Envelope(task=ADD, args=[5, 5]),
                                Envelope(task=ADD, args=[5, 5], unique_key="mine")])
    assert [r.disposition for r in results] == ["created", "duplicate", "created"]
    assert results[1].id == results[0].id
    assert Job.objects.get(id=results[2].id).unique_key == "mine"
    again = services.enqueue([Envelope(task=ADD, args=[5, 5])], unique=False)  # the call's bypass still wins
    assert again[0].disposition == "created" and Job.objects.get(id=again[0].id).unique_key is None


def test_a_bad_value_is_refused_naming_the_field_and_nothing_is_written(db):
    with pytest.raises(InvalidEnvelope) as caught:
        services.set_task_config(ADD, uniqueness="sometimes")
    assert caught.value.field == "uniqueness" and "off, arguments" in str(caught.value)
    assert not TaskConfig.objects.exists()


def test_the_one_statement_enqueue_outside_a_transaction_follows_the_switch(live_clock):
    """Outside ``atomic`` a PostgreSQL enqueue is one statement that assumes the task has
    no TaskConfig row; the row's switch must still apply (its check sends the call round)."""
    from django.db import connection

    assert not connection.in_atomic_block
    services.set_task_config(ADD, uniqueness="arguments")
    assert add.enqueue(3, 4).id == add.enqueue(3, 4).id
    services.set_task_config(REBUILD, uniqueness="off")
    assert rebuild_index.enqueue().id != rebuild_index.enqueue().id
    services.set_task_config(REBUILD, uniqueness=None)
    assert rebuild_index.enqueue().id == rebuild_index.enqueue().id
