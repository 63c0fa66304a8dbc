"""The TaskResult of a job that ran, field by field as Django's own backends build it."""

from boson_django.taskresults import task_error
from boson_django.testing import run_until_idle
from tests.testapp.tasks import chooses, fail


def test_error_traceback_is_the_python_traceback_alone(store_clock):
    """Django's backends store ``"".join(traceback.format_exception(exc))``: no line before it."""
    result = fail.enqueue("boom")
    run_until_idle()
    result.refresh()
    (error,) = result.errors
    assert error.exception_class is ValueError
    assert error.traceback.startswith("Traceback (most recent call last):\n")
    assert error.traceback.endswith("ValueError: boom\n")


def test_error_without_a_traceback_keeps_its_line(store_clock):
    """A discard, a timeout or a cancel has no Python traceback: the stored line is all."""
    result = chooses.enqueue("discard")
    run_until_idle()
    result.refresh()
    (error,) = result.errors
    assert error.exception_class_path == "boson_django.worker.outcomes.Discard"
    assert error.traceback == "boson_django.worker.outcomes.Discard: bad input"


def test_a_multiline_reason_is_not_taken_for_a_traceback():
    error = task_error("boson_django.worker.outcomes.Discard: bad\ninput")
    assert error.traceback == "boson_django.worker.outcomes.Discard: bad\ninput"
