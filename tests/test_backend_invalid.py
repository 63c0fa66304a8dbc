"""Django's ``InvalidTask`` for a task or an option the store cannot hold, raised where
Django raises it: the backend's ``validate_task``, which ``Task.__post_init__`` calls (so
``@task`` and ``.using()``), and ``enqueue``. Still an ``InvalidEnvelope`` naming the field."""

from __future__ import annotations

import math

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from boson_django import registry
from boson_django.compat import TASKS_MODULE, InvalidTaskError, task, task_backends
from boson_django.errors import InvalidEnvelope, InvalidTask, UnsupportedType
from boson_django.models import Job
from tests.testapp import contract_tasks
from tests.testapp.tasks import add, report_for

#: (option, a value the store cannot take): each is refused naming the option.
BAD_OPTIONS = [
    ("max_attempts", 0), ("max_attempts", 1.5), ("max_attempts", True), ("max_attempts", 2**31),
    ("weight", -1), ("weight", math.nan), ("weight", math.inf), ("weight", "heavy"),
    ("lease_ms", 0), ("lease_ms", "soon"), ("lease_ms", -5),
    ("timeout_ms", 0), ("retention_ms", -1), ("retention_ms", math.inf),
    ("rate_class", ""), ("rate_class", "smtp\n"), ("rate_class", "r" * 101),
    ("unique_key", 3), ("unique_key", "k" * 256), ("unique_key", "a\x00b"),
    ("queue_name", "a\tb"), ("queue_name", "a\x00b"), ("queue_name", "q" * 101), ("queue_name", " "),
]
IDS = [f"{option}={value!r:.12}" for option, value in BAD_OPTIONS]


def _refused(raised: pytest.ExceptionInfo, field: str) -> None:
    """Both Django's ``InvalidTask`` and boson's ``InvalidEnvelope``, naming ``field``."""
    error = raised.value
    assert isinstance(error, InvalidTask) and isinstance(error, InvalidTaskError) and isinstance(error, InvalidEnvelope)
    assert error.field == field and str(error).startswith(f"{field}: ")


@pytest.mark.parametrize("option, value", BAD_OPTIONS, ids=IDS)
def test_a_bad_option_of_task_is_an_invalid_task_at_decoration(option, value):
    with pytest.raises(InvalidTaskError) as raised:
        task(**{option: value})(contract_tasks.order_marker.func)
    _refused(raised, option)


@pytest.mark.parametrize("option, value", BAD_OPTIONS, ids=IDS)
def test_a_bad_option_of_using_is_an_invalid_task_at_using(db, option, value):
    with pytest.raises(InvalidTaskError) as raised:
        add.using(**{option: value})
    _refused(raised, option)
    assert registry.get(add.module_path) is add


@pytest.mark.parametrize("value", [0, -1, 1.5, "3"])
def test_a_bad_crash_limit_of_task_is_an_invalid_task(value):
    with pytest.raises(InvalidTaskError) as raised:
        task(crash_limit=value)(contract_tasks.order_marker.func)
    _refused(raised, "crash_limit")


def test_crash_limit_given_to_using_is_an_invalid_task(db):
    with pytest.raises(InvalidTaskError) as raised:
        add.using(crash_limit=2)
    _refused(raised, "crash_limit")
    assert "not per call" in str(raised.value)


@pytest.mark.parametrize("option, value, named", [
    ("max_attempts", 0, "max_attempts"), ("weight", -1, "weight"), ("unique_key", 3, "unique_key"),
    ("queue_name", "a\nb", "queue"), ("rate_class", "", "rate_class"),
])
def test_a_task_made_without_its_checks_is_refused_by_validate_task_and_by_enqueue(db, option, value, named):
    """``validate_task`` is the backend's public check, as Django's own backends have it.
    A task made without ``__post_init__`` skipped it: its enqueue refuses the same value
    with ``InvalidTask`` too (naming the envelope's field), nothing written."""
    backend = task_backends["default"]
    backend.validate_task(add)
    unchecked = object.__new__(type(add))
    for name in type(add).__dataclass_fields__:
        object.__setattr__(unchecked, name, getattr(add, name))
    object.__setattr__(unchecked, option, value)
    with pytest.raises(InvalidTaskError) as raised:
        backend.validate_task(unchecked)
    _refused(raised, option)
    with pytest.raises(InvalidTaskError) as raised:
        unchecked.enqueue(1, 2)
    _refused(raised, named)
    with pytest.raises(InvalidTaskError):
        async_to_sync(unchecked.aenqueue)(1, 2)
    assert not Job.objects.exists()


def test_a_unique_key_its_function_makes_too_long_is_an_invalid_task_at_enqueue(store_clock):
    """The key of a ``unique_key`` function is known at enqueue only: refused there, as
    Django's enqueue refuses a task, and nothing is written."""
    with pytest.raises(InvalidTaskError) as raised:
        report_for.enqueue("r" * 300)
    _refused(raised, "unique_key")
    assert not Job.objects.exists()
    assert Job.objects.get(id=report_for.enqueue("north").id).unique_key == "report:north"


@pytest.mark.parametrize("args, kind", [
    ((math.nan,), ValueError), (({1, 2},), TypeError), (("a\x00b",), ValueError),
], ids=["nan", "set", "nul"])
def test_a_bad_argument_is_no_invalid_task(store_clock, args, kind):
    """Django refuses an argument JSON cannot hold with ``TypeError`` / ``ValueError``
    (``normalize_json``), not ``InvalidTask``: the task is fine, the call is not."""
    with pytest.raises(kind) as raised:
        add.enqueue(*args)
    assert isinstance(raised.value, InvalidEnvelope) and not isinstance(raised.value, InvalidTaskError)
    assert raised.value.field == "args"
    assert isinstance(raised.value, UnsupportedType) == (kind is TypeError)
    assert not Job.objects.exists()


def _dummy_backend() -> dict:
    return {"BACKEND": f"{TASKS_MODULE}.backends.dummy.DummyBackend", "QUEUES": ["default"]}


@pytest.mark.parametrize("alias", ["default", "dummy"])
def test_invalid_task_is_raised_at_using_as_by_djangos_own_backend(db, alias):
    """Django's DummyBackend refuses a queue it does not list at ``.using()``, before any
    enqueue; boson refuses a queue name the store cannot hold at the same point."""
    bad = {"default": "bad\nqueue", "dummy": "unlisted"}[alias]
    with override_settings(TASKS={"default": {"BACKEND": "boson_django.backend.BosonBackend"}, "dummy": _dummy_backend()}):
        moved = add.using(backend=alias)
        with pytest.raises(InvalidTaskError, match="queue|Queue"):
            moved.using(queue_name=bad)


def test_a_task_boson_will_not_run_is_an_invalid_task_at_enqueue(store_clock, settings):
    """Outside ``ALLOWED_TASK_MODULES`` (the strict mode): refused at enqueue, where
    Django's enqueue refuses a task its backend cannot run, naming ``task``."""
    from tests.elsewhere import jobs

    with override_settings(BOSON={**settings.BOSON, "ALLOWED_TASK_MODULES": ["tests.testapp"]}):
        with pytest.raises(InvalidTaskError, match="ALLOWED_TASK_MODULES") as raised:
            jobs.double.enqueue(5)
    _refused(raised, "task")
    assert not Job.objects.exists()
