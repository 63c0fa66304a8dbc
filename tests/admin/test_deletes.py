"""Deleting task configs, buckets and queues from the admin: through the services, behind
Django's delete permissions; a queue only when it is idle."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.urls import reverse

from boson_django import services
from boson_django.models import Bucket, Queue, TaskConfig
from tests.admin.conftest import staff_client
from tests.factories import ADD, SEND_MAIL, enqueue_one

pytestmark = pytest.mark.django_db


def _delete_url(model: str, pk: str) -> str:
    return reverse(f"admin:boson_django_{model}_delete", args=[quote(pk)])


def _delete_selected(client, model: str, pks: list[str]):
    url = reverse(f"admin:boson_django_{model}_changelist")
    return client.post(url, {"action": "delete_selected", "_selected_action": pks, "post": "yes"}, follow=True)


def _calls(monkeypatch, name: str) -> list[str]:
    """Record the names the admin passes to ``services.<name>`` (and still call it)."""
    called: list[str] = []
    real = getattr(services, name)
    monkeypatch.setattr(services, name, lambda pk, **kw: called.append(pk) or real(pk, **kw))
    return called


def test_deleting_a_task_config_goes_through_the_service(superuser_client, store_clock, monkeypatch):
    services.set_task_config(SEND_MAIL, max_attempts=7)
    called = _calls(monkeypatch, "delete_task_config")
    response = superuser_client.post(_delete_url("taskconfig", SEND_MAIL), {"post": "yes"})
    assert response.status_code == 302
    assert called == [SEND_MAIL]
    assert not TaskConfig.objects.exists()
    job_id = enqueue_one(SEND_MAIL, args=["a@x"])
    assert services.job_state(job_id)[0].max_attempts == 3  # the code default again


def test_delete_selected_task_configs_goes_through_the_service(superuser_client, monkeypatch):
    services.set_task_config(SEND_MAIL, max_attempts=7)
    services.set_task_config(ADD, max_active=2)
    called = _calls(monkeypatch, "delete_task_config")
    _delete_selected(superuser_client, "taskconfig", [SEND_MAIL, ADD])
    assert sorted(called) == sorted([SEND_MAIL, ADD])
    assert not TaskConfig.objects.exists()


def test_deleting_a_bucket_goes_through_the_service(superuser_client, store_clock, monkeypatch):
    services.set_rate_limit("smtp", 1, 60_000)
    services.set_rate_limit("partner", 1, 60_000)
    called = _calls(monkeypatch, "delete_rate_limit")
    assert superuser_client.post(_delete_url("bucket", "smtp"), {"post": "yes"}).status_code == 302
    _delete_selected(superuser_client, "bucket", ["partner"])
    assert called == ["smtp", "partner"]
    assert not Bucket.objects.exists()


def test_an_idle_queue_is_deleted_through_the_service(superuser_client, store_clock, monkeypatch):
    services.pause_queue("old_lane")
    services.resume_queue("old_lane")
    called = _calls(monkeypatch, "delete_queue")
    assert superuser_client.post(_delete_url("queue", "old_lane"), {"post": "yes"}).status_code == 302
    assert called == ["old_lane"]
    assert not Queue.objects.filter(name="old_lane").exists()


def test_a_queue_with_jobs_or_a_pause_is_kept_and_the_page_says_why(superuser_client, store_clock):
    enqueue_one(queue="busy")
    services.pause_queue("held")
    for name, why in (("busy", "jobs are still in it"), ("held", "it is paused (resume it first)")):
        page = superuser_client.get(_delete_url("queue", name)).content.decode()
        assert f"Queue {name}: kept, {why}" in page
        superuser_client.post(_delete_url("queue", name), {"post": "yes"})
        assert Queue.objects.filter(name=name).exists()


def test_delete_selected_queues_deletes_none_while_one_is_kept(superuser_client, store_clock):
    enqueue_one(queue="busy")
    services.pause_queue("idle")
    services.resume_queue("idle")
    response = _delete_selected(superuser_client, "queue", ["busy", "idle"])
    assert "Queue busy: kept, jobs are still in it" in response.content.decode()
    assert set(Queue.objects.values_list("name", flat=True)) == {"busy", "idle"}
    _delete_selected(superuser_client, "queue", ["idle"])
    assert set(Queue.objects.values_list("name", flat=True)) == {"busy"}


def test_a_queue_that_got_a_job_after_the_confirmation_is_kept_with_a_warning(superuser_client, store_clock, monkeypatch):
    services.pause_queue("lane")
    services.resume_queue("lane")
    monkeypatch.setattr(services, "reason_to_keep_queue", lambda name, **kw: None)  # confirmed while idle
    enqueue_one(queue="lane")
    response = _delete_selected(superuser_client, "queue", ["lane"])
    assert _said(response) == ["Not deleted (changed meanwhile): lane"], "and no 'Successfully deleted'"
    assert Queue.objects.filter(name="lane").exists()
    assert not LogEntry.objects.exists(), "no 'Deleted' entry for a row the service kept"


def test_a_deletion_reports_what_the_service_deleted_and_kept(superuser_client, store_clock, monkeypatch):
    for name in ("a", "b", "c"):
        services.resume_queue(name)
    monkeypatch.setattr(services, "reason_to_keep_queue", lambda name, **kw: None)  # confirmed while idle
    enqueue_one(queue="b")
    response = _delete_selected(superuser_client, "queue", ["a", "b", "c"])
    assert _said(response) == ["Deleted 2 queues: a, c", "Not deleted (changed meanwhile): b"]
    services.resume_queue("<i>")
    response = superuser_client.post(_delete_url("queue", "<i>"), {"post": "yes"}, follow=True)
    assert _said(response) == ["Deleted 1 queue: <i>"]
    assert "Deleted 1 queue: &lt;i&gt;" in response.content.decode()


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_deletion_is_logged_once_made(superuser_client, store_clock):
    services.set_rate_limit("smtp", 1, 60_000)
    superuser_client.post(_delete_url("bucket", "smtp"), {"post": "yes"})
    assert list(LogEntry.objects.values_list("object_id", "action_flag", "user__username")) == [("smtp", DELETION, "root")]


@pytest.mark.parametrize("model, pk", [("taskconfig", ADD), ("bucket", "smtp"), ("queue", "old_lane")])
def test_deleting_needs_the_delete_permission(viewer_client, store_clock, model, pk):
    services.set_task_config(ADD, max_active=2)
    services.set_rate_limit("smtp", 1, 60_000)
    services.resume_queue("old_lane")
    assert viewer_client.post(_delete_url(model, pk), {"post": "yes"}).status_code == 403
    changelist = viewer_client.get(reverse(f"admin:boson_django_{model}_changelist")).content.decode()
    assert "delete_selected" not in changelist
    _delete_selected(viewer_client, model, [pk])
    assert TaskConfig.objects.exists() and Bucket.objects.exists() and Queue.objects.exists()
    deleter = staff_client("deleter", [f"view_{model}", f"delete_{model}"])
    assert "delete_selected" in deleter.get(reverse(f"admin:boson_django_{model}_changelist")).content.decode()
    assert deleter.post(_delete_url(model, pk), {"post": "yes"}).status_code == 302
    model_class = {"taskconfig": TaskConfig, "bucket": Bucket, "queue": Queue}[model]
    assert not model_class.objects.filter(pk=pk).exists()
