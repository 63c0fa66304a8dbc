"""Tasks and their results pickle, as Django 6.1 pickles a Task (by its module path), on
Django 6.1 and on the backport (whose own Task does not pickle) -- with a ``unique_key``
function too, a lambda included, which is taken from the declared task again."""

from __future__ import annotations

import pickle

import pytest

from boson_django.compat import TaskResultStatus, task_backends
from boson_django.models import Job
from boson_django.testing import run_until_idle
from tests.testapp.tasks import add, rebuild_index, report_for, send_mail


def _again(value):
    return pickle.loads(pickle.dumps(value))


@pytest.mark.parametrize("task", [add, send_mail, rebuild_index, report_for], ids=lambda t: t.name)
def test_a_task_pickles_to_itself(task):
    back = _again(task)
    assert back == task and back.func is task.func and back.unique_key == task.unique_key  # a function: itself


def test_a_using_copy_pickles_with_its_overrides(store_clock):
    later = store_clock.now()
    copy = report_for.using(priority=7, queue_name="reports", run_after=later, max_attempts=2, weight=3)
    back = _again(copy)
    assert back == copy and back.per_call == copy.per_call
    assert (back.priority, back.queue_name, back.run_after, back.max_attempts, back.weight) == (7, "reports", later, 2, 3)
    assert back.unique_key is report_for.unique_key


def test_a_round_tripped_task_enqueues_with_the_same_unique_key(store_clock):
    first = report_for.enqueue("north")
    again = _again(report_for).enqueue("north")
    copied = _again(report_for.using(priority=3)).enqueue("north")
    assert first.id == again.id == copied.id
    assert Job.objects.get(id=first.id).unique_key == "report:north"


def test_the_result_of_enqueue_pickles(store_clock):
    result = report_for.enqueue("south")
    back = _again(result)
    assert back == result and back.task == report_for
    assert back.task.unique_key is report_for.unique_key


def test_the_result_of_get_result_pickles_before_and_after_it_ran(store_clock):
    sent = report_for.using(queue_name="reports").enqueue("east")
    waiting = task_backends["default"].get_result(sent.id)
    assert _again(waiting) == waiting
    run_until_idle()
    done = report_for.get_result(sent.id)
    back = _again(done)
    assert back == done and back.status == TaskResultStatus.SUCCESSFUL and back.return_value == "east"
    assert back.task.queue_name == "reports" and back.task.unique_key is report_for.unique_key


def test_a_lambda_given_only_to_using_does_not_pickle(db):
    """Python pickles a function by reference; a lambda that is not the declared task's
    has none. Documented; a module-level function works."""
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(add.using(unique_key=lambda a, b: f"{a}-{b}"))
    assert _again(add.using(unique_key=_module_level_key)).unique_key is _module_level_key


def _module_level_key(a, b):
    return f"{a}+{b}"


def test_unpickling_a_task_whose_path_is_no_task_any_more_is_a_value_error(monkeypatch):
    """As Django 6.1's ``Task._reconstruct`` says it."""
    data = pickle.dumps(add)
    import tests.testapp.tasks as module

    monkeypatch.setattr(module, "add", add.func)
    with pytest.raises(ValueError, match="to point to a Task instance"):
        pickle.loads(data)
