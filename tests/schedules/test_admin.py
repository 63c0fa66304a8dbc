"""The Schedule admin: next/last run on the store clock, enable/disable, "run now" via services."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from boson_django.models import Job, StoredSchedule
from boson_django.schedules import scheduler, sync_schedules
from tests.admin.conftest import staff_client
from tests.factories import ADD

CHANGELIST = "admin:boson_django_storedschedule_changelist"


@pytest.fixture
def declared(settings, store_clock):
    settings.BOSON = {**settings.BOSON, "SCHEDULES": {
        "nightly": {"task": ADD, "cron": "0 3 * * *", "timezone": "Europe/Paris", "args": [1, 2]},
    }}
    return store_clock


def test_the_changelist_shows_declared_schedules_with_next_and_last_run(admin_client, declared):
    page = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert "nightly" in page and "0 3 * * * (Europe/Paris)" in page
    assert "2030-01-01 02:00:00 UTC (in 2h 00m)" in page, "03:00 Paris is 02:00 UTC in winter"
    assert "never" in page
    scheduler.run_now("nightly")
    declared.advance(5_000)
    page = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert "5s ago" in page and ">available<" in page, "last run and its job's state"


def test_run_now_action_enqueues_through_the_services(admin_client, declared, monkeypatch):
    sync_schedules()
    calls = []
    real = scheduler.enqueue
    monkeypatch.setattr(scheduler, "enqueue", lambda envs, **kw: calls.append(envs) or real(envs, **kw))
    response = admin_client.post(reverse(CHANGELIST), {"action": "run_now_selected", "_selected_action": ["nightly"]}, follow=True)
    assert "1 enqueued" in response.content.decode()
    (job,) = Job.objects.filter(meta__schedule="nightly")
    assert len(calls) == 1 and (job.task, job.args, job.state) == (ADD, [1, 2], "available")
    assert StoredSchedule.objects.get(name="nightly").last_job_id == job.id


def test_disable_and_enable_buttons(admin_client, declared):
    sync_schedules()
    change = reverse("admin:boson_django_storedschedule_change", args=["nightly"])
    assert "Run now" in admin_client.get(change).content.decode()
    admin_client.post(reverse("admin:boson_django_storedschedule_op", args=["nightly", "disable"]))
    assert StoredSchedule.objects.get(name="nightly").enabled is False
    assert "disabled" in admin_client.get(reverse(CHANGELIST)).content.decode()
    admin_client.post(reverse("admin:boson_django_storedschedule_op", args=["nightly", "enable"]))
    assert StoredSchedule.objects.get(name="nightly").enabled is True


def test_a_viewer_sees_schedules_but_cannot_operate_them(declared):
    viewer = staff_client("staff", ["view_storedschedule"])
    assert viewer.get(reverse(CHANGELIST)).status_code == 200
    page = viewer.get(reverse("admin:boson_django_storedschedule_change", args=["nightly"])).content.decode()
    assert "Run now" not in page
    assert viewer.post(reverse("admin:boson_django_storedschedule_op", args=["nightly", "run_now"])).status_code == 403
    assert not Job.objects.exists()
    assert _client_get_status(["view_job"], CHANGELIST) == 403


def _client_get_status(codenames: list[str], name: str) -> int:
    User.objects.filter(username="staff").delete()
    return staff_client("staff", codenames).get(reverse(name)).status_code


def test_the_buttons_work_for_a_name_the_admin_escapes(admin_client, settings, store_clock):
    """``nightly_report``'s admin URL form is ``nightly_5Freport``: the buttons post there."""
    import html
    import re

    from django.contrib.admin.utils import quote

    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"nightly_report": {"task": ADD, "cron": "0 3 * * *"}}}
    sync_schedules()
    page = admin_client.get(reverse("admin:boson_django_storedschedule_change", args=[quote("nightly_report")])).content.decode()
    (action,) = re.findall(r'action="([^"]*/op/disable/)"', page)
    assert admin_client.post(html.unescape(action), follow=True).status_code == 200
    assert StoredSchedule.objects.get(name="nightly_report").enabled is False


def test_a_user_without_the_view_permission_writes_nothing_by_opening_the_list(declared):
    """The list syncs the declared schedules (a write) only for those allowed to see it."""
    assert staff_client("staff", ["view_job"]).get(reverse(CHANGELIST)).status_code == 403
    assert not StoredSchedule.objects.exists()


def test_run_now_of_a_schedule_whose_task_is_gone_is_refused_with_a_message(admin_client, declared, settings):
    """A schedule's row stays after its declaration goes (its task renamed or removed):
    "run now" enqueues nothing and says why (it was a server error)."""
    sync_schedules()
    settings.BOSON = {**settings.BOSON, "SCHEDULES": {}}
    StoredSchedule.objects.filter(name="nightly").update(task="tests.testapp.tasks.renamed")
    response = admin_client.post(reverse("admin:boson_django_storedschedule_op", args=["nightly", "run_now"]), follow=True)
    assert response.status_code == 200
    assert "unknown task &#x27;tests.testapp.tasks.renamed&#x27;" in response.content.decode()
    response = admin_client.post(reverse(CHANGELIST), {"action": "run_now_selected", "_selected_action": ["nightly"]}, follow=True)
    assert response.status_code == 200
    assert "unknown task &#x27;tests.testapp.tasks.renamed&#x27;" in response.content.decode()
    assert not Job.objects.exists()
    assert StoredSchedule.objects.get(name="nightly").last_job_id in (None, "")


def test_run_now_of_a_schedule_whose_arguments_the_tasks_unique_key_refuses_says_why(admin_client, settings, store_clock):
    """The task's ``unique_key`` function raising on the schedule's arguments was a server
    error; the scheduler logs and postpones such a slot, "run now" says why."""
    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"keyed": {"task": "tests.testapp.tasks.report_for", "cron": "0 3 * * *"}}}
    sync_schedules()
    response = admin_client.post(reverse("admin:boson_django_storedschedule_op", args=["keyed", "run_now"]), follow=True)
    assert response.status_code == 200
    assert "nothing enqueued" in response.content.decode() and "missing 1 required positional argument" in response.content.decode()
    assert not Job.objects.exists()


def test_schedule_operations_write_the_admin_history(admin_client, declared):
    from django.contrib.admin.models import LogEntry

    sync_schedules()
    admin_client.post(reverse("admin:boson_django_storedschedule_op", args=["nightly", "disable"]))
    admin_client.post(reverse("admin:boson_django_storedschedule_op", args=["nightly", "disable"]))  # already: no entry
    admin_client.post(reverse(CHANGELIST), {"action": "run_now_selected", "_selected_action": ["nightly"]})
    (job,) = Job.objects.filter(meta__schedule="nightly")
    assert list(LogEntry.objects.order_by("id").values_list("object_id", "change_message")) == [
        ("nightly", "Disabled"), ("nightly", f"Ran now: enqueued job {job.id}"),
    ]



CODE_NIGHTLY = "tests.schedules.tasks.nightly"  # the row name of the schedule declared next to it


@pytest.mark.parametrize("extra, message", [
    ({"broken": {"task": ADD, "cron": "99 * * * *"}}, "Bad minute"),
    ({CODE_NIGHTLY: {"task": ADD, "cron": "0 4 * * *"}}, "declared twice"),
])
def test_a_bad_declaration_does_not_break_the_list(admin_client, declared, settings, extra, message):
    """The list syncs first; a declaration the sync refuses (the system checks report it,
    but a web server does not run them) made every view of the list a server error. The
    list shows the rows as they are, with the sync's error."""
    import tests.schedules.tasks  # noqa: F401 -- declares CODE_NIGHTLY in code

    sync_schedules()
    settings.BOSON = {
        **settings.BOSON, "SCHEDULES": {**settings.BOSON["SCHEDULES"], **extra},
        "TASK_MODULES": [*settings.BOSON["TASK_MODULES"], "tests.schedules.tasks"],
    }
    response = admin_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    page = response.content.decode()
    assert "0 3 * * * (Europe/Paris)" in page, "the rows synced before"
    assert "Schedules not synced" in page and message in page
