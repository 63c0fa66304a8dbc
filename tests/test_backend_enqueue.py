"""The Tasks backend's enqueue side: names, policy precedence, results before running."""

from datetime import timedelta

import pytest
from django.test import override_settings

from boson_django import services
from boson_django.compat import InvalidTaskError, TaskResultStatus, task
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job
from tests.testapp import contract_tasks
from tests.testapp.tasks import add, rebuild_index, send_mail


def test_enqueue_through_django_api_uses_module_path(store_clock):
    result = add.enqueue(1, 2)
    assert result.status == TaskResultStatus.READY
    job = Job.objects.get(id=result.id)
    assert job.task == "tests.testapp.tasks.add"
    assert (job.args, job.kwargs) == ([1, 2], {})
    assert add.get_result(result.id).id == result.id


def test_code_defaults_apply_then_task_config_overrides(store_clock):
    first = Job.objects.get(id=send_mail.enqueue("a@x").id)
    assert (first.max_attempts, first.rate_class, first.weight) == (3, "smtp", 2.0)
    services.set_task_config("tests.testapp.tasks.send_mail", max_attempts=7, weight=1)
    second = Job.objects.get(id=send_mail.enqueue("b@x").id)
    assert (second.max_attempts, second.rate_class, second.weight) == (7, "smtp", 1.0)


def test_using_overrides_task_config(store_clock):
    services.set_task_config("tests.testapp.tasks.send_mail", max_attempts=7, queue="mail")
    job = Job.objects.get(id=send_mail.using(max_attempts=9, queue_name="urgent").enqueue("c@x").id)
    assert (job.max_attempts, job.queue) == (9, "urgent")
    plain = Job.objects.get(id=send_mail.enqueue("d@x").id)
    assert plain.queue == "mail"


def test_a_using_value_equal_to_the_code_default_still_wins_over_task_config(store_clock):
    """``send_mail`` declares max_attempts=3 and priority 0; the row says 7 and 5. A call
    that asks for 3 and 0 gets them: the value was given, not inherited."""
    services.set_task_config("tests.testapp.tasks.send_mail", max_attempts=7, priority=5, queue="mail")
    job = Job.objects.get(id=send_mail.using(max_attempts=3, priority=0, queue_name="default").enqueue("e@x").id)
    assert (job.max_attempts, job.priority, job.queue) == (3, 0, "default")
    again = Job.objects.get(id=send_mail.using(max_attempts=3).using(weight=1).enqueue("f@x").id)
    assert (again.max_attempts, again.priority, again.queue) == (3, 5, "mail"), "a second using() keeps the first's"


def test_crash_limit_comes_from_the_task_not_from_using(store_clock):
    """No envelope carries a crash limit: ``.using(crash_limit=...)`` was accepted and then
    dropped without a word. It is refused, naming the field; the task's own comes from
    its TaskConfig row, then ``@task``, then ``BOSON``."""
    with pytest.raises(InvalidTaskError, match="^crash_limit: ") as raised:
        send_mail.using(crash_limit=1)
    assert isinstance(raised.value, InvalidEnvelope) and raised.value.field == "crash_limit"
    assert not Job.objects.exists()
    assert Job.objects.get(id=send_mail.enqueue("a@x").id).crash_limit == 3  # BOSON["CRASH_LIMIT"]
    services.set_task_config("tests.testapp.tasks.send_mail", crash_limit=1)
    assert Job.objects.get(id=send_mail.using(max_attempts=9).enqueue("b@x").id).crash_limit == 1


def test_static_unique_key_deduplicates(store_clock):
    first = rebuild_index.enqueue()
    second = rebuild_index.enqueue()
    assert first.id == second.id
    assert Job.objects.filter(task="tests.testapp.tasks.rebuild_index").count() == 1


def test_a_fixed_unique_key_too_long_is_refused_at_decoration_naming_it(store_clock):
    """A task's own fixed key went unchecked: PostgreSQL failed the insert with a
    DataError; SQLite stored a key longer than the column. Django's ``InvalidTask`` is
    raised by ``@task`` itself now, as for any option the store cannot hold."""
    with pytest.raises(InvalidTaskError, match="^unique_key: must be at most 255 characters"):
        task(unique_key="k" * 256)(contract_tasks.order_marker.func)
    created = add.using(unique_key="k" * 255).enqueue(1, 2)
    assert Job.objects.get(id=created.id).unique_key == "k" * 255


def test_result_task_is_the_task_enqueued_with_its_using_overrides(store_clock):
    """Django's ``TaskResult.task`` is the Task the result was enqueued for: a
    ``.using(...)`` copy's priority, queue and run_after, not the declared task's."""
    run_after = store_clock.now() + timedelta(minutes=5)
    sent = add.using(priority=50, queue_name="urgent", run_after=run_after)
    result = sent.enqueue(1, 2)
    assert result.task == sent
    assert (result.task.priority, result.task.queue_name, result.task.run_after) == (50, "urgent", run_after)


def test_any_queue_name_is_valid_unless_queues_are_listed(store_clock):
    """Django's base backend allows only "default" without QUEUES; boson creates queues
    on first use, so it allows any name then, and checks names against QUEUES when given."""
    assert Job.objects.get(id=add.using(queue_name="anything").enqueue(1, 2).id).queue == "anything"
    listed = {"default": {"BACKEND": "boson_django.backend.BosonBackend", "QUEUES": ["a"]}}
    with override_settings(TASKS=listed):
        assert add.using(queue_name="a").enqueue(1, 2).status == TaskResultStatus.READY
        with pytest.raises(InvalidTaskError, match="Queue 'b' is not valid"):
            add.using(queue_name="b")


@pytest.mark.parametrize("args", [({1, 2},), (object(),), ([b"bytes"],)], ids=["set", "object", "bytes"])
def test_an_argument_json_cannot_hold_is_a_type_error_as_in_django(store_clock, args):
    """Django's backends raise ``TypeError`` for such an argument; boson's error is one
    too, and still names the field (and is still an ``InvalidEnvelope``). Nothing is written."""
    with pytest.raises(TypeError, match=r"^args\[0\](\[0\])?: is not JSON") as raised:
        add.enqueue(*args)
    assert isinstance(raised.value, InvalidEnvelope) and raised.value.field == "args"
    assert not Job.objects.exists()


def test_a_kwarg_json_cannot_hold_is_a_type_error_naming_kwargs(store_clock):
    with pytest.raises(TypeError, match=r"^kwargs\['b'\]: is not JSON: set"):
        add.enqueue(a=1, b={2})
    assert not Job.objects.exists()


@pytest.mark.parametrize("call", ["task", "services"])
def test_an_error_of_a_single_enqueue_names_the_field_without_a_batch_index(store_clock, call):
    """``task.enqueue(...)`` never saw a list: ``args[0]: ...``, not ``envelope[0].args[0]: ...``
    (a batch of one through the service reads the same)."""
    with pytest.raises(InvalidEnvelope) as raised:
        if call == "task":
            add.enqueue(float("nan"), 2)
        else:
            services.enqueue([services.Envelope(task=add.module_path, args=[float("nan"), 2])])
    assert str(raised.value).startswith("args[0]: ") and raised.value.index is None
    assert not Job.objects.exists()


def test_task_enqueued_is_sent_once_per_enqueue_with_its_result(store_clock):
    """Django's ``task_enqueued``: sender the backend class, the result the caller gets;
    a duplicate of a unique key still answers the call, with the holder's result."""
    from boson_django.backend import BosonBackend
    from boson_django.compat import task_enqueued

    heard = []

    def receiver(sender, task_result, **kwargs):
        heard.append((sender, task_result.id, task_result.status, task_result.args))

    task_enqueued.connect(receiver)
    try:
        made = add.enqueue(1, 2)
        first = rebuild_index.enqueue()
        again = rebuild_index.enqueue()
    finally:
        task_enqueued.disconnect(receiver)
    assert again.id == first.id
    assert heard == [
        (BosonBackend, made.id, TaskResultStatus.READY, [1, 2]),
        (BosonBackend, first.id, TaskResultStatus.READY, []),
        (BosonBackend, first.id, TaskResultStatus.READY, []),
    ]


#: A NUL character anywhere in the arguments, and where the error says it is.
NUL_CALLS = {
    "arg": ((["a\x00b"], {}), "args[0]: contains a NUL character"),
    "nested": (([1, {"k": ["x", "y\x00"]}], {}), "args[1]['k'][1]: contains a NUL character"),
    "kwarg": (([], {"name": "a\x00"}), "kwargs['name']: contains a NUL character"),
    "key": (([{"a\x00": 1}], {}), "args[0]: key 'a\\x00' contains a NUL character"),
    "kwarg-key": (([], {"d": {"ok": {"b\x00": 1}}}), "kwargs['d']['ok']: key 'b\\x00' contains a NUL"),
}


@pytest.mark.parametrize("call, message", list(NUL_CALLS.values()), ids=list(NUL_CALLS))
def test_a_nul_character_in_an_argument_is_refused_naming_where_on_every_database(store_clock, call, message):
    """PostgreSQL's jsonb cannot hold ``\\u0000``; SQLite could, but a job must not be
    accepted by one store and refused by the other. Django's own backends accept it
    (``normalize_json`` keeps any text): boson refuses it, at enqueue, nothing written."""
    args, kwargs = call
    with pytest.raises(InvalidEnvelope) as raised:
        add.enqueue(*args, **kwargs)
    assert str(raised.value).startswith(message) and raised.value.field in ("args", "kwargs")
    with pytest.raises(InvalidEnvelope) as raised:
        services.enqueue([services.Envelope(task=add.module_path), services.Envelope(task=add.module_path, args=args, kwargs=kwargs)])
    assert str(raised.value).startswith(f"envelope[1].{message}")
    assert not Job.objects.exists()


def test_djangos_immediate_backend_keeps_a_nul_argument_and_a_nan_return_value(db):
    """What boson deliberately differs from (docs/tasks.md): Django's ImmediateBackend runs
    the call as it is, a NUL in its text, and keeps a NaN its task returns."""
    from boson_django.compat import TASKS_MODULE

    immediate = {"BACKEND": f"{TASKS_MODULE}.backends.immediate.ImmediateBackend"}
    with override_settings(TASKS={"default": {"BACKEND": "boson_django.backend.BosonBackend"}, "immediate": immediate}):
        assert contract_tasks.order_marker.using(backend="immediate").enqueue("a\x00b").return_value == "a\x00b"
        returned = contract_tasks.returns_value.using(backend="immediate").enqueue(float("nan")).return_value
    assert returned != returned  # NaN


def test_using_keeps_djangos_meaning_of_its_arguments(db):
    """As Django's ``Task.using``: None leaves the task's value, an unknown keyword is a
    ``TypeError``; a boson option given as None falls back to TaskConfig and settings."""
    moved = send_mail.using(priority=7, queue_name="mail")
    assert moved.using(priority=None, queue_name=None, run_after=None, backend=None) == moved
    assert send_mail.using(max_attempts=None).max_attempts is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'priorty'"):
        send_mail.using(priorty=3)
