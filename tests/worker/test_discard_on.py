"""``discard_on``, as a real worker acks it: a handler's exception that its task's
``discard_on`` lists (an instance of a listed class, subclasses included) ends the job
``failed`` after one attempt, with one attempt record naming the exception; any other
exception is retried. The list comes from the TaskConfig row (edited in the admin), then
``BOSON["TASK_POLICIES"]`` by module prefix, then ``@task(discard_on=...)``.

The jobs run in ``boson_worker --burst`` (in this process, or a subprocess), on the
frozen store clock: the retry's backoff is never waited for."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from boson_django import services
from boson_django.models import TaskConfig
from boson_django.testing import run_until_idle
from tests.admin.conftest import staff_client
from tests.testapp.discard_tasks import asks_to_retry, async_lookup, lookup, lookup_discarding, raises
from tests.worker.conftest import Proc, burst, job
from tests.worker.test_policies_live import TUNER, add_url, change_url, post

MODULE = "tests.testapp.discard_tasks"
LOOKUP = f"{MODULE}.lookup"
NOT_FOUND = "django.core.exceptions.ObjectDoesNotExist"
#: What the worker stores for ``lookup`` of a row that does not exist.
DOES_NOT_EXIST = "tests.testapp.models.StartMark.DoesNotExist: StartMark matching query does not exist."


def policies(**entries: Any) -> Any:
    """``BOSON["TASK_POLICIES"]`` for the test (keys with dots passed as a dict)."""
    return override_settings(BOSON={"TASK_MODULES": ["tests.testapp.more_tasks"], "TASK_POLICIES": entries})


def discarding(prefix: str = MODULE, *classes: str) -> Any:
    return override_settings(BOSON={"TASK_MODULES": ["tests.testapp.more_tasks"],
                                    "TASK_POLICIES": {prefix: {"discard_on": list(classes or [NOT_FOUND])}}})


def outcome_of(job_id: str) -> tuple[str, int, list[tuple[str, str]]]:
    """The job's state and attempts, and each attempt record's outcome and error's first line."""
    found = job(job_id)
    return found.state, found.attempt, [(r.outcome, r.error.split("\n", 1)[0]) for r in services.errors(job_id)]


def test_a_deleted_row_under_a_prefix_policy_fails_after_one_attempt_naming_the_exception(live_clock):
    with discarding("tests.testapp"):
        job_id = lookup.enqueue(404).id
        burst()
    assert outcome_of(job_id) == ("failed", 1, [("discard", DOES_NOT_EXIST)])
    (record,) = services.errors(job_id)
    assert "Traceback (most recent call last):" in record.error and "StartMark.objects.get" in record.error
    result = lookup.get_result(job_id)
    assert result.status == "FAILED"
    assert [e.exception_class_path for e in result.errors] == ["tests.testapp.models.StartMark.DoesNotExist"]


def test_the_same_failure_without_the_policy_is_retried(live_clock):
    job_id = lookup.enqueue(404).id
    burst()
    assert outcome_of(job_id) == ("retryable", 1, [("retry", DOES_NOT_EXIST)])


def test_an_exception_the_policy_does_not_list_is_retried(live_clock):
    with discarding():
        job_id = raises.enqueue("partner down").id
        burst()
    assert outcome_of(job_id) == ("retryable", 1, [("retry", "builtins.ValueError: partner down")])


def test_a_prefix_matches_on_a_dotted_boundary_only(live_clock):
    """``tests.testapp.discard`` is a prefix of the module's name, not of its path."""
    with discarding("tests.testapp.discard"):
        job_id = lookup.enqueue(404).id
        burst()
    assert outcome_of(job_id)[0] == "retryable"


def test_a_whole_task_path_is_a_key_for_that_task_alone(live_clock):
    with discarding(LOOKUP):
        ids = lookup.enqueue(404).id, lookup_discarding.using(queue_name="other").enqueue(404).id
        async_id = async_lookup.enqueue(404).id
        burst()
    assert [outcome_of(i)[0] for i in ids] == ["failed", "failed"]  # the second by its own @task(discard_on=...)
    assert outcome_of(async_id)[0] == "retryable"


def test_an_async_handler_s_exception_is_discarded_too(live_clock):
    with discarding():
        job_id = async_lookup.enqueue(404).id
        burst()
    assert outcome_of(job_id)[:2] == ("failed", 1)


def test_code_discard_on_applies_and_a_prefix_policy_overrides_it(live_clock):
    """``@task(discard_on=...)`` discards; ``TASK_POLICIES`` above it replaces its list."""
    first = lookup_discarding.enqueue(404).id
    burst()
    assert outcome_of(first)[:2] == ("failed", 1)
    with discarding(MODULE, "builtins.KeyError"):
        second = lookup_discarding.enqueue(405).id
        burst()
    assert outcome_of(second)[:2] == ("retryable", 1)


def test_a_retry_the_handler_asks_for_is_never_discarded(live_clock):
    with discarding(MODULE, "Exception"):
        job_id = asks_to_retry.enqueue().id
        burst()
    assert outcome_of(job_id)[:2] == ("retryable", 1)


def test_the_longest_prefix_that_sets_discard_on_wins(live_clock):
    with policies(**{"tests": {"discard_on": [NOT_FOUND], "max_attempts": 5}, MODULE: {"discard_on": ["KeyError"]}}):
        job_id = lookup.enqueue(404).id
        burst()
    assert outcome_of(job_id)[:2] == ("retryable", 1)
    assert job(job_id).max_attempts == 5  # the shorter prefix still sets what the longer does not


def test_discard_on_edited_in_the_admin_applies_to_the_next_failure_of_a_queued_job(live_clock):
    """The retrying job was enqueued before the edit: the row is read when a handler
    raises, so the flood of retries an operator sees stops at their next attempts."""
    tuner = staff_client("tuner", TUNER)
    job_id = lookup.enqueue(404).id
    burst()
    assert outcome_of(job_id)[0] == "retryable"
    post(tuner, add_url("taskconfig"), {"task": LOOKUP, "discard_on": f"{NOT_FOUND}\n"})
    assert TaskConfig.objects.get(task=LOOKUP).discard_on == NOT_FOUND
    live_clock.advance(3_600_000)
    burst()
    assert outcome_of(job_id) == ("failed", 2, [("retry", DOES_NOT_EXIST), ("discard", DOES_NOT_EXIST)])


def test_the_admin_s_row_overrides_the_prefix_policy_and_cleared_gives_it_back(live_clock):
    tuner = staff_client("tuner", TUNER)
    with discarding():
        post(tuner, add_url("taskconfig"), {"task": LOOKUP, "discard_on": "KeyError"})
        kept = lookup.enqueue(404).id
        burst()
        assert outcome_of(kept)[:2] == ("retryable", 1)
        post(tuner, change_url("taskconfig", LOOKUP), {"discard_on": ""})
        assert TaskConfig.objects.get(task=LOOKUP).discard_on is None
        live_clock.advance(3_600_000)
        burst()
    assert outcome_of(kept)[:2] == ("failed", 2)


def test_the_admin_refuses_a_path_that_names_no_exception_class(live_clock):
    tuner = staff_client("tuner", TUNER)
    response = tuner.post(add_url("taskconfig"), {"task": LOOKUP, "discard_on": "django.core.exceptions.nothing"})
    assert response.status_code == 200
    assert "django.core.exceptions.nothing" in response.context["adminform"].form.errors["discard_on"][0]
    assert not TaskConfig.objects.exists()


def test_run_until_idle_discards_as_the_worker_does(live_clock):
    with discarding():
        job_id = lookup.enqueue(404).id
        assert run_until_idle() == 1
    assert outcome_of(job_id) == ("failed", 1, [("discard", DOES_NOT_EXIST)])


@pytest.fixture
def discard_settings(tmp_path: Any) -> Any:
    """A settings module for worker subprocesses: the tests' own plus a prefix policy."""
    (tmp_path / "discard_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n"
        f"BOSON = {{'TASK_MODULES': ['tests.testapp.more_tasks', {MODULE!r}],\n"
        f"         'TASK_POLICIES': {{'tests.testapp': {{'discard_on': [{NOT_FOUND!r}]}}}}}}\n"
    )
    return tmp_path


def test_a_worker_process_discards_under_the_settings_it_was_started_with(live_clock, discard_settings, procs):
    doomed, failing = lookup.enqueue(404).id, raises.enqueue("partner down").id
    worker = Proc(discard_settings, "w-discard", "--burst", settings="discard_settings", path=discard_settings)
    procs.append(worker)
    assert worker.exit_code() == 0, worker.text()
    assert outcome_of(doomed) == ("failed", 1, [("discard", DOES_NOT_EXIST)])
    assert outcome_of(failing)[:2] == ("retryable", 1)
