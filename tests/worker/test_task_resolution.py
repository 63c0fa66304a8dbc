"""A job's task is found by its path, as Django's own backends find it: any module-level
Task of a boson backend runs, wherever its module lives; nothing else ever does.

The modules under ``tests/elsewhere`` are in no installed app and in no BOSON setting.
"""

from __future__ import annotations

import sys

import pytest
from django.conf import settings
from django.test import override_settings

from boson_django import registry, services
from boson_django.compat import TASKS_MODULE, TaskResultStatus, task
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job
from boson_django.services import Envelope
from tests.elsewhere import jobs
from tests.testapp.tasks import add, noop
from tests.worker.conftest import Proc, burst, state

pytestmark = pytest.mark.django_db(transaction=True)


def strict(*allowed: str) -> override_settings:
    return override_settings(BOSON={**settings.BOSON, "ALLOWED_TASK_MODULES": list(allowed)})


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """The file a test module appends a line to each time it is imported."""
    path = tmp_path / "imports.txt"
    monkeypatch.setenv("BOSON_TEST_IMPORT_MARKER", str(path))
    return path


def imports(marker) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


def renamed_job(name: str) -> str:
    """A job whose row names ``name`` (as a hand-written or tampered row would)."""
    job_id = noop.enqueue().id
    Job.objects.filter(id=job_id).update(task=name)
    return job_id


def test_a_task_outside_the_installed_apps_runs_in_a_worker_that_never_imported_it(live_clock, folder, procs):
    """The worker subprocess has only tests.settings: no app and no setting names
    tests.elsewhere.jobs. It imports the module when a job names it."""
    result = jobs.double.enqueue(21)
    worker = Proc(folder, "elsewhere", "--burst")
    procs.append(worker)
    assert worker.exit_code() == 0, worker.text()
    done = jobs.double.get_result(result.id)
    assert (done.status, done.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


@pytest.mark.parametrize(("name", "says"), [
    ("os.system", "names a builtin_function_or_method, not a Task"),
    ("tests.elsewhere.jobs.plain", "names a function, not a Task"),
    ("tests.elsewhere.jobs.NotATask", "names a type, not a Task"),
    ("tests.elsewhere.jobs.Holder.doubled", "it names the Task 'tests.elsewhere.jobs.double', declared under another path"),
    ("tests.elsewhere.jobs.missing", "module 'tests.elsewhere.jobs' has no 'missing'"),
    ("tests.elsewhere.broken.job",
     "importing module 'tests.elsewhere.broken' failed: builtins.RuntimeError: this module refuses to import"),
    ("no_such_package.tasks.job", "no module of 'no_such_package.tasks.job' can be imported"),
    ("job", "a task's name is its module path"),
])
def test_a_row_naming_anything_but_a_boson_task_is_undecodable_and_the_worker_goes_on(live_clock, name, says):
    bad = renamed_job(name)
    good = add.enqueue(1, 2)
    burst()
    assert state(bad) == "failed"
    (record,) = services.errors(bad)
    assert record.outcome == "undecodable"
    assert record.error.startswith("boson_django.worker.outcomes.UndecodableJob:")
    assert name in record.error and says in record.error
    assert add.get_result(good.id).return_value == 3


def test_a_module_that_fails_to_import_is_tried_once_per_process(live_clock, marker):
    with override_settings(BOSON={**settings.BOSON}):  # a fresh resolution, as in a new process
        first = [renamed_job("tests.elsewhere.broken.one"), renamed_job("tests.elsewhere.broken.one")]
        burst()
        assert [state(job_id) for job_id in first] == ["failed", "failed"]
        assert registry.get("tests.elsewhere.broken.one") is None
    assert imports(marker) == ["broken"]


def test_a_task_of_another_backend_never_runs_and_is_refused_at_enqueue(live_clock, monkeypatch):
    other = {"BACKEND": f"{TASKS_MODULE}.backends.immediate.ImmediateBackend"}
    with override_settings(TASKS={**settings.TASKS, "other": other}):
        monkeypatch.setattr(jobs, "plain", task(backend="other")(jobs.plain))
        found, why = registry.resolve("tests.elsewhere.jobs.plain")
        assert found is None and why == "its Task is declared for the backend 'other', which is not a boson backend"
        with pytest.raises(InvalidEnvelope, match="task: unknown task 'tests.elsewhere.jobs.plain'.*not a boson backend"):
            services.enqueue([Envelope(task="tests.elsewhere.jobs.plain", args=[1])])
        bad = renamed_job("tests.elsewhere.jobs.plain")
        burst()
    assert state(bad) == "failed" and "not a boson backend" in services.errors(bad)[0].error


def test_an_unknown_task_is_refused_at_enqueue_saying_why(live_clock):
    with pytest.raises(InvalidEnvelope) as refused:
        services.enqueue([Envelope(task="tests.testapp.tasks.nope")])
    assert refused.value.field == "task"
    assert str(refused.value) == (
        "task: unknown task 'tests.testapp.tasks.nope': not a module-level task of a boson backend "
        "(module 'tests.testapp.tasks' has no 'nope')"
    )
    assert not Job.objects.exists()


class TestAllowedTaskModules:
    """``ALLOWED_TASK_MODULES``: the opt-in strict mode. A module outside it is never
    imported, whatever a row names."""

    def test_a_module_outside_the_list_is_never_imported(self, live_clock, marker):
        name = "tests.elsewhere.untouched.hello"
        with strict("tests.testapp"):
            with pytest.raises(InvalidEnvelope, match="not in BOSON\\['ALLOWED_TASK_MODULES'\\] \\(tests.testapp\\)"):
                services.enqueue([Envelope(task=name)])
            bad = renamed_job(name)
            good = add.enqueue(2, 2)
            burst()
        assert state(bad) == "failed" and "ALLOWED_TASK_MODULES" in services.errors(bad)[0].error
        assert add.get_result(good.id).return_value == 4
        assert imports(marker) == [] and "tests.elsewhere.untouched" not in sys.modules

    def test_a_listed_package_allows_its_modules(self, live_clock):
        with strict("tests.testapp", "tests.elsewhere"):
            result = jobs.double.enqueue(5)
            burst()
        assert jobs.double.get_result(result.id).return_value == 10

    def test_a_listed_name_is_a_package_not_a_string_prefix(self, live_clock):
        with strict("tests.testapp", "tests.else"):
            assert registry.get(jobs.double.module_path) is None
            with pytest.raises(InvalidEnvelope, match="ALLOWED_TASK_MODULES"):
                jobs.double.enqueue(5)

    def test_a_declared_task_outside_the_list_does_not_run_either(self, live_clock):
        """The module is imported already (this test module imported it): the list
        still decides."""
        result = jobs.double.enqueue(5)
        with strict("tests.testapp"):
            burst()
        assert state(result.id) == "failed"
        assert "ALLOWED_TASK_MODULES" in services.errors(result.id)[0].error
