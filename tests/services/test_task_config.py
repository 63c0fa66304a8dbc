"""Task configs: written, warned about when their task is not registered, removed."""

from __future__ import annotations

import warnings

import pytest

from boson_django import services
from boson_django.errors import UnregisteredTaskWarning
from boson_django.models import TaskConfig
from tests.factories import ADD, SEND_MAIL, admit_one, enqueue_one
from tests.services.support import job_row


def test_a_config_for_an_unregistered_task_is_written_with_a_warning_naming_the_closest_task(db):
    with pytest.warns(UnregisteredTaskWarning, match="'tests.testapp.tasks.ad'") as caught:
        services.set_task_config("tests.testapp.tasks.ad", max_active=2)
    (warning,) = caught
    assert f"Did you mean {ADD!r}?" in str(warning.message)
    assert warning.filename == __file__  # points at the caller, not at boson's own code
    assert TaskConfig.objects.get(task="tests.testapp.tasks.ad").max_active == 2


def test_a_config_for_a_name_like_no_task_warns_without_a_suggestion(db):
    with pytest.warns(UnregisteredTaskWarning) as caught:
        services.set_task_config("billing.tasks.zqxj_settle", max_active=2)  # like no task, docs' samples included
    assert "Did you mean" not in str(caught[0].message)


@pytest.mark.parametrize(("typed", "meant"), [
    ("send_mail", "tests.testapp.tasks.send_mail"),  # the bare function name
    ("tests.testap.tasks.noop", "tests.testapp.tasks.noop"),  # a typo in the module
    ("tests.testapp.tasks.future_task", None),  # shares only the module path with the tasks
])
def test_the_suggestion_is_judged_by_the_function_name(db, typed, meant):
    with pytest.warns(UnregisteredTaskWarning) as caught:
        services.set_task_config(typed, max_active=2)
    said = str(caught[0].message)
    assert (f"Did you mean {meant!r}?" in said) if meant else ("Did you mean" not in said), said


def test_a_warning_turned_into_an_error_does_not_undo_the_write(db):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnregisteredTaskWarning)
        with pytest.raises(UnregisteredTaskWarning):
            services.set_task_config("billing.tasks.charge_card", max_active=2)
    assert TaskConfig.objects.get(task="billing.tasks.charge_card").max_active == 2


def test_a_config_for_a_registered_task_does_not_warn(db):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        services.set_task_config(ADD, max_active=2)


def test_deleting_a_config_brings_back_the_code_defaults_for_later_jobs(store_clock):
    services.set_task_config(SEND_MAIL, max_attempts=7, queue="mail", priority=3)
    configured = job_row(enqueue_one(SEND_MAIL, args=["a@x"]))
    assert services.delete_task_config(SEND_MAIL) is True
    later = job_row(enqueue_one(SEND_MAIL, args=["b@x"]))
    assert (later["max_attempts"], later["queue"], later["priority"], later["rate_class"]) == (3, "default", 0, "smtp")
    assert job_row(configured["id"])["max_attempts"] == 7  # a job keeps the policy it was enqueued with
    assert not TaskConfig.objects.filter(task=SEND_MAIL).exists()


def test_deleting_a_config_lifts_its_max_active_at_the_next_admission(store_clock):
    services.set_task_config(ADD, max_active=1)
    for n in range(2):
        enqueue_one(ADD, args=[n, n], queue="capped")
    admit_one(queues=["capped"])
    assert services.admit("w1", ["capped"], 1) == []
    services.delete_task_config(ADD)
    admit_one(queues=["capped"])


def test_deleting_a_config_that_is_not_there_is_false(db):
    assert services.delete_task_config(ADD) is False


def test_deleting_a_config_checks_the_name(db):
    with pytest.raises(ValueError, match="task"):
        services.delete_task_config("")


def test_an_enqueue_alone_after_the_delete_takes_the_code_defaults(live_clock):
    """Outside a transaction (on PostgreSQL, the one-statement enqueue, which first
    assumes the task has no row): the deleted row is not kept anywhere."""
    services.set_task_config(SEND_MAIL, max_attempts=7)
    assert job_row(enqueue_one(SEND_MAIL, args=["a@x"]))["max_attempts"] == 7
    services.delete_task_config(SEND_MAIL)
    assert job_row(enqueue_one(SEND_MAIL, args=["b@x"]))["max_attempts"] == 3
