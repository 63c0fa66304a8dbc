"""``BOSON["TASK_POLICIES"]``: policy by task-module prefix, where it stands among the
other sources of a job's policy, and the checks of it; ``discard_on`` as code and
``services.set_task_config`` take it. (The worker's side: tests/worker/test_discard_on.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ObjectDoesNotExist
from django.test import override_settings

from boson_django import services, task_policies
from boson_django.compat import task
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job, TaskConfig
from tests.testapp.models import StartMark
from tests.testapp.tasks import noop, send_mail

SEND_MAIL = "tests.testapp.tasks.send_mail"
NOT_FOUND = "django.core.exceptions.ObjectDoesNotExist"


def policies(entries: dict[str, Any], **boson: Any) -> Any:
    return override_settings(BOSON={"TASK_MODULES": ["tests.testapp.more_tasks"], "TASK_POLICIES": entries, **boson})


def policy(result: Any) -> tuple[Any, ...]:
    job = Job.objects.get(id=result.id)
    return job.max_attempts, job.rate_class, job.weight, job.queue, job.priority, job.crash_limit


@pytest.mark.parametrize("prefix, task, covered", [
    ("wagtail", "wagtail.tasks.update_reference_index_task", True),
    ("wagtail.", "wagtail.images.tasks.set_image_focal_point_task", True),
    ("wagtail", "wagtail_localize.tasks.translate", False),
    ("wagtail.", "wagtailmedia.tasks.x", False),
    ("a.b", "a.bc.task", False),
    ("a.b", "a.b", True),
    ("modelsearch.tasks.insert_or_update_object_task", "modelsearch.tasks.insert_or_update_object_task", True),
    ("modelsearch.tasks.insert", "modelsearch.tasks.insert_or_update_object_task", False),
])
def test_a_prefix_covers_the_paths_under_it_on_a_dot(prefix, task, covered):
    assert task_policies.covers(prefix, task) is covered


def test_each_field_comes_from_the_longest_prefix_that_sets_it():
    entries = {"tests": {"max_attempts": 4, "queue": "slow"}, "tests.testapp.tasks.": {"max_attempts": 6},
               "tests.testapp.tasks.send": {"priority": 9}, "tests.testapp.more_tasks": {"weight": 3}}
    with policies(entries):
        assert task_policies.for_task(SEND_MAIL) == {"max_attempts": 6, "queue": "slow"}
    with policies({}):
        assert task_policies.for_task(SEND_MAIL) == {}, "a lookup kept from other settings"


# -- precedence: .using() > TaskConfig > TASK_POLICIES > @task(...) > BOSON ------------------


def test_layered_puts_the_row_over_the_prefix_over_the_code():
    code = {"max_attempts": 2, "queue": "code", "priority": None, "weight": 3.0}
    with policies({"tests": {"queue": "prefix", "priority": 5}}):
        assert task_policies.layered(SEND_MAIL, code) == {
            "max_attempts": 2, "queue": "prefix", "priority": 5, "weight": 3.0,
        }
        assert task_policies.layered(SEND_MAIL, code, {"queue": "row"})["queue"] == "row"
        assert task_policies.layered("other.module.task", code)["queue"] == "code"


def test_a_prefix_policy_overrides_the_code_defaults(store_clock):
    with policies({"tests.testapp": {"max_attempts": 6, "rate_class": "bulk", "queue": "mail", "crash_limit": 2}}):
        assert policy(send_mail.enqueue("a@x")) == (6, "bulk", 2.0, "mail", 0, 2)


def test_a_prefix_policy_of_another_module_leaves_the_code_defaults(store_clock):
    with policies({"tests.testapp.more_tasks": {"max_attempts": 6}, "tests.testapp.task": {"max_attempts": 7}}):
        assert policy(send_mail.enqueue("a@x")) == (3, "smtp", 2.0, "default", 0, 3)


def test_a_prefix_policy_overrides_the_global_settings(store_clock):
    with policies({"tests.testapp.tasks.noop": {"max_attempts": 4}}, MAX_ATTEMPTS=11, CRASH_LIMIT=5):
        assert policy(noop.enqueue())[::5] == (4, 5)
    with policies({}, MAX_ATTEMPTS=11):
        assert policy(noop.enqueue())[0] == 11


def test_a_task_config_row_overrides_the_prefix_policy_and_using_overrides_both(store_clock):
    services.set_task_config(SEND_MAIL, max_attempts=8)
    with policies({"tests": {"max_attempts": 6, "priority": 4}}):
        assert policy(send_mail.enqueue("a@x"))[::4] == (8, 4)
        assert policy(send_mail.using(max_attempts=9, priority=1).enqueue("b@x"))[::4] == (9, 1)


def test_one_statement_enqueues_resolve_the_prefix_too(live_clock):
    """PostgreSQL enqueues one job outside a transaction in one statement, which checks
    the TaskConfig row it assumed: with and without a row, the prefix stands where it
    does on the other path (on SQLite this runs the transactional path)."""
    with policies({"tests.testapp": {"max_attempts": 6, "weight": 4}}):
        assert policy(send_mail.enqueue("a@x"))[:3] == (6, "smtp", 4.0)
        services.set_task_config(SEND_MAIL, weight=0.5)
        assert policy(send_mail.enqueue("b@x"))[:3] == (6, "smtp", 0.5)


def test_a_prefix_policy_value_that_fails_its_check_is_refused_at_enqueue_naming_the_field(store_clock):
    with policies({"tests.testapp": {"max_attempts": 0}}):
        with pytest.raises(InvalidEnvelope, match="max_attempts"):
            send_mail.enqueue("a@x")
    assert not Job.objects.exists()


# -- the system checks ---------------------------------------------------------------


def check_messages(entries: Any) -> list[str]:
    with policies(entries):
        return [m.msg for m in checks.run_checks(tags=["boson"]) if m.id == "boson.E002"]


def test_a_sound_setting_passes_the_checks():
    assert check_messages({"modelsearch.tasks": {"discard_on": [NOT_FOUND], "max_attempts": 5},
                           "wagtail.": {"discard_on": [ObjectDoesNotExist, "KeyError"], "queue": "cms",
                                        "priority": -5, "weight": 0.5, "lease_ms": 60_000, "timeout_ms": None}}) == []


@pytest.mark.parametrize("entries, says", [
    ({"": {"max_attempts": 5}}, "entry '': not a module path"),
    ({"wagtail-x": {}}, "entry 'wagtail-x': not a module path"),
    ({"wagtail": ["max_attempts"]}, "entry 'wagtail': must be a dict of policy fields"),
    ({"wagtail": {"max_attempt": 5}}, "entry 'wagtail': has an unknown field 'max_attempt'"),
    ({"wagtail": {"max_active": 2}}, "entry 'wagtail': sets 'max_active', which only a TaskConfig row can"),
    ({"wagtail": {"max_attempts": 0}}, "entry 'wagtail': max_attempts: must be >= 1, got 0"),
    ({"wagtail": {"priority": 500}}, "entry 'wagtail': priority"),
    ({"wagtail": {"queue": ""}}, "entry 'wagtail': queue"),
    ({"wagtail": {"discard_on": ["django.core.exceptions.NoSuchError"]}},
     "entry 'wagtail': discard_on: 'django.core.exceptions.NoSuchError' cannot be imported"),
    ({"wagtail": {"discard_on": ["no_such_module.Error"]}},
     "entry 'wagtail': discard_on: 'no_such_module.Error' cannot be imported: ModuleNotFoundError"),
    ({"wagtail": {"discard_on": ["django.conf.settings"]}},
     "entry 'wagtail': discard_on: 'django.conf.settings' is not an exception class"),
    ({"wagtail": {"discard_on": [int]}}, "entry 'wagtail': discard_on: lists <class 'int'>, which is not an exception"),
    ({"wagtail": {"discard_on": 3}}, "entry 'wagtail': discard_on: must list exception classes"),
])
def test_a_bad_setting_is_an_error_naming_the_key_and_the_entry(entries, says):
    (message,) = check_messages(entries)
    assert message.startswith("BOSON['TASK_POLICIES'] ") and says in message, message


def test_a_setting_that_is_not_a_dict_is_an_error_naming_the_key():
    (message,) = check_messages(["wagtail"])
    assert message.startswith("BOSON['TASK_POLICIES'] must be dict")


# -- discard_on in code and in TaskConfig ------------------------------------------------


def plain() -> None:
    """A module-level function the tests below decorate."""


def test_code_takes_exception_classes_and_paths_and_refuses_anything_else():
    assert task(discard_on=[ObjectDoesNotExist, NOT_FOUND])(plain).discard_on == (ObjectDoesNotExist, NOT_FOUND)
    assert task(discard_on=NOT_FOUND)(plain).discard_on == (NOT_FOUND,)
    with pytest.raises(InvalidEnvelope, match="discard_on: lists <class 'int'>, which is not an exception class"):
        task(discard_on=(int,))(plain)
    with pytest.raises(InvalidEnvelope, match="discard_on: must list exception classes"):
        task(discard_on=3)(plain)


def test_discard_on_is_the_task_s_own_never_per_call():
    with pytest.raises(InvalidEnvelope, match="discard_on: is set per task"):
        send_mail.using(discard_on=(KeyError,))


def test_set_task_config_stores_discard_on_as_paths(db):
    services.set_task_config(SEND_MAIL, discard_on=[StartMark.DoesNotExist, "KeyError", NOT_FOUND])
    stored = TaskConfig.objects.get(task=SEND_MAIL).discard_on
    assert stored.split("\n") == ["tests.testapp.models.StartMark.DoesNotExist", "KeyError", NOT_FOUND]
    services.set_task_config(SEND_MAIL, discard_on=None)
    assert TaskConfig.objects.get(task=SEND_MAIL).discard_on is None


def test_set_task_config_refuses_a_path_naming_no_exception_class_and_writes_nothing(db):
    class Local(Exception):
        pass

    for bad, says in [("os.getcwd", "is not an exception class"), ("no_such_module.Error", "cannot be imported"),
                      ([Local], "does not name"), ("a-b.Error", "is not a dotted path"),
                      ("ObjectDoesNotExist", "is no builtin exception: give the class's dotted path")]:
        with pytest.raises(InvalidEnvelope, match=f"discard_on: .*{says}"):
            services.set_task_config(SEND_MAIL, discard_on=bad)
    assert not TaskConfig.objects.exists()
