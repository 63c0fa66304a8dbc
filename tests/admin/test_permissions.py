"""A view-only staff user sees everything and changes nothing; partial permissions gate
each action; CSRF protects every state-changing POST."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from boson_django import services
from boson_django.models import Bucket, Queue
from tests.factories import state_of

pytestmark = pytest.mark.django_db


def _changelist(client, model="job"):
    return client.get(reverse(f"admin:boson_django_{model}_changelist")).content.decode()


def test_view_only_user_is_offered_no_action_and_no_button(viewer_client, store):
    body = _changelist(viewer_client)
    assert "retry_selected" not in body and "cancel_selected" not in body
    page = viewer_client.get(reverse("admin:boson_django_job_change", args=[store.failed])).content.decode()
    assert "/op/retry/" not in page and "/op/cancel/" not in page
    assert 'name="_save"' not in page


@pytest.mark.parametrize("op, state", [("retry", "failed"), ("cancel", "available"), ("release", "quarantined")])
def test_view_only_user_cannot_post_a_job_op(viewer_client, store, op, state):
    job_id = getattr(store, state)
    response = viewer_client.post(reverse("admin:boson_django_job_op", args=[job_id, op]))
    assert response.status_code == 403
    assert state_of(job_id) == state


def test_view_only_user_cannot_run_actions_by_posting(viewer_client, store):
    response = viewer_client.post(reverse("admin:boson_django_job_changelist"),
                                  {"action": "retry_selected", "index": 0, "_selected_action": [store.failed]})
    assert response.status_code == 200  # Django re-shows the list: the action is not a valid choice
    assert state_of(store.failed) == "failed"


def test_view_only_user_cannot_pause_queues_or_edit_anything(viewer_client, store):
    services.set_rate_limit("smtp", 10, 1000)
    assert viewer_client.post(reverse("admin:boson_django_queue_op", args=["q-failed", "pause"])).status_code == 403
    assert not Queue.objects.get(name="q-failed").paused
    assert viewer_client.post(reverse("admin:boson_django_bucket_change", args=["smtp"]), {"limit": 1, "window_ms": 1, "burst": 0}).status_code == 403
    assert Bucket.objects.get().limit == 10
    assert viewer_client.get(reverse("admin:boson_django_taskconfig_add")).status_code == 403
    assert viewer_client.post(reverse("admin:boson_django_job_change", args=[store.failed]), {"state": "completed"}).status_code == 403
    assert state_of(store.failed) == "failed"


def test_superuser_cannot_edit_or_delete_a_job_through_a_form(superuser_client, store):
    assert superuser_client.post(reverse("admin:boson_django_job_change", args=[store.failed]), {"state": "completed"}).status_code == 403
    assert superuser_client.get(reverse("admin:boson_django_job_delete", args=[store.failed])).status_code == 403
    assert superuser_client.get(reverse("admin:boson_django_job_add")).status_code == 403
    assert state_of(store.failed) == "failed"


def test_operator_may_retry_but_not_release_or_pause(operator_client, store):
    body = _changelist(operator_client)
    assert "retry_selected" in body and "cancel_selected" in body and "release_selected" not in body
    assert operator_client.post(reverse("admin:boson_django_job_op", args=[store.failed, "retry"])).status_code == 302
    assert state_of(store.failed) == "available"
    assert operator_client.post(reverse("admin:boson_django_job_op", args=[store.quarantined, "release"])).status_code == 403
    assert state_of(store.quarantined) == "quarantined"
    assert operator_client.post(reverse("admin:boson_django_queue_op", args=["q-failed", "pause"])).status_code == 403
    assert "pause_selected" not in _changelist(operator_client, "queue")


def test_anonymous_users_are_sent_to_login(client, store):
    response = client.post(reverse("admin:boson_django_job_op", args=[store.failed, "retry"]))
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert state_of(store.failed) == "failed"


def test_posts_without_a_csrf_token_are_refused(store):
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.post(reverse("admin:boson_django_job_op", args=[store.failed, "retry"])).status_code == 403
    response = client.post(reverse("admin:boson_django_job_changelist"),
                           {"action": "retry_selected", "index": 0, "_selected_action": [store.failed]})
    assert response.status_code == 403
    assert client.post(reverse("admin:boson_django_queue_op", args=["q-failed", "pause"])).status_code == 403
    assert state_of(store.failed) == "failed"
    assert not Queue.objects.get(name="q-failed").paused


def _rows() -> tuple:
    from boson_django.models import Job, QuarantinedFingerprint, StoredSchedule, TaskConfig

    return (sorted(Job.objects.values_list("id", "state", "attempt")), sorted(Queue.objects.values_list("name", "paused")),
            sorted(Bucket.objects.values_list("name", "limit")), sorted(TaskConfig.objects.values_list("task", "max_attempts")),
            sorted(StoredSchedule.objects.values_list("name", "enabled", "last_run_at")), QuarantinedFingerprint.objects.count())


@pytest.mark.parametrize("who", ["anonymous", pytest.param("staff without boson permissions", marks=pytest.mark.slow),
                                 pytest.param("viewer", marks=pytest.mark.slow)])
def test_no_action_or_button_of_any_list_changes_anything_without_its_permission(store, settings, who):
    """Every action of every list (explicit and "all matching"), every per-row button and
    every form, posted by a user lacking the permission each needs."""
    from django.contrib.admin.utils import quote

    from boson_django.models import QuarantinedFingerprint
    from boson_django.schedules import sync_schedules
    from tests.admin.conftest import VIEW_MODELS, staff_client
    from tests.factories import ADD

    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"nightly": {"task": ADD, "cron": "0 3 * * *", "args": [1, 2]}}}
    sync_schedules()
    services.set_rate_limit("smtp", 10, 1000)
    services.set_task_config(ADD, max_attempts=4)
    client = {"anonymous": Client(), "staff without boson permissions": staff_client("staff", []),
              "viewer": staff_client("viewer", [f"view_{m}" for m in (*VIEW_MODELS, "storedschedule")])}[who]
    pks = {"queue": ["q-failed", "q-available"], "bucket": ["smtp"], "taskconfig": [ADD], "storedschedule": ["nightly"],
           "quarantinedfingerprint": list(QuarantinedFingerprint.objects.values_list("pk", flat=True))}
    jobs = [store.failed, store.available, store.running, store.quarantined]
    posts: list[tuple[str, dict]] = [
        (reverse(f"admin:boson_django_{model}_changelist"),
         {"action": action, "_selected_action": pks.get(model, jobs), "index": 0, "post": "yes", **across})
        for model in ("job", "failedjob", "quarantinedjob", "lease", *pks)
        for action in ("retry_selected", "cancel_selected", "release_selected", "pause_selected", "resume_selected",
                       "enable_selected", "disable_selected", "run_now_selected", "delete_selected")
        for across in ({}, {"select_across": "1", "boson_confirm": "yes", "snapshot": "2099-01-01T00:00:00+00:00"})
    ]
    posts += [(reverse("admin:boson_django_job_op", args=[job, op]), {}) for job in jobs for op in ("retry", "cancel", "release")]
    posts += [(reverse("admin:boson_django_queue_op", args=["q-failed", op]), {}) for op in ("pause", "resume")]
    posts += [(reverse("admin:boson_django_storedschedule_op", args=["nightly", op]), {}) for op in ("enable", "disable", "run_now")]
    form = {"name": "new", "task": ADD, "limit": 1, "window_ms": 1, "burst": 0, "max_attempts": 9, "post": "yes"}
    posts += [(reverse(f"admin:boson_django_{model}_{view}", args=[quote(pk)]), form)
              for model in pks for pk in pks[model] for view in ("change", "delete")]
    posts += [(reverse(f"admin:boson_django_{model}_add"), form) for model in ("bucket", "taskconfig", "queue")]
    before = _rows()
    for url, data in posts:
        response = client.post(url, data)
        assert response.status_code in (200, 302, 403), (url, data.get("action"), response.status_code)
        assert _rows() == before, (url, data.get("action"))
