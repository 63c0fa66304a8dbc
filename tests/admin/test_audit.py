"""Operator actions leave entries in the admin history: who changed which row, and how."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.urls import reverse

from tests.factories import state_of

pytestmark = pytest.mark.django_db


def _entries() -> list[tuple[str, str, str, int]]:
    return sorted(LogEntry.objects.values_list("user__username", "object_id", "change_message", "action_flag"))


def test_a_bulk_retry_logs_each_job_it_changed_and_none_it_skipped(operator_client, store):
    data = {"action": "retry_selected", "index": 0, "_selected_action": [store.failed, store.cancelled, store.completed]}
    operator_client.post(reverse("admin:boson_django_job_changelist"), data, follow=True)
    assert state_of(store.completed) == "completed"
    assert _entries() == sorted([("operator", store.failed, "Retried", CHANGE), ("operator", store.cancelled, "Retried", CHANGE)])


def test_a_job_page_button_logs_and_the_job_history_shows_it(superuser_client, store):
    superuser_client.post(reverse("admin:boson_django_job_op", args=[quote(store.available), "cancel"]))
    assert _entries() == [("root", store.available, "Cancelled", CHANGE)]
    history = superuser_client.get(reverse("admin:boson_django_job_history", args=[quote(store.available)]))
    assert history.status_code == 200 and "Cancelled" in history.content.decode()


def test_a_release_logs_the_job_released(superuser_client, store):
    data = {"action": "release_selected", "index": 0, "_selected_action": [store.quarantined]}
    superuser_client.post(reverse("admin:boson_django_job_changelist"), data, follow=True)
    [(user, job_id, message, _)] = _entries()
    assert (user, job_id) == ("root", store.quarantined) and message.startswith("Released from quarantine")


def test_a_refused_action_logs_nothing(superuser_client, store):
    superuser_client.post(reverse("admin:boson_django_job_op", args=[quote(store.completed), "cancel"]))
    assert _entries() == []


def test_queue_pause_and_resume_log_each_queue(superuser_client, store):
    url = reverse("admin:boson_django_queue_changelist")
    superuser_client.post(url, {"action": "pause_selected", "index": 0, "_selected_action": ["q-failed", "q-available"]})
    superuser_client.post(reverse("admin:boson_django_queue_op", args=["q-failed", "resume"]))
    assert _entries() == sorted([("root", "q-failed", "Paused", CHANGE), ("root", "q-available", "Paused", CHANGE),
                                 ("root", "q-failed", "Resumed", CHANGE)])


def test_a_fingerprint_release_logs_the_job_that_reached_the_crash_limit(superuser_client, store):
    """Not whichever parked copy a query returned last."""
    from boson_django.models import QuarantinedFingerprint
    from tests.factories import ADD, enqueue_one

    copies = [enqueue_one(ADD, queue="q-quarantined", args=[1, 2]) for _ in range(2)]
    fp = QuarantinedFingerprint.objects.get()
    assert fp.job_id == store.quarantined and {state_of(c) for c in copies} == {"quarantined"}
    superuser_client.post(reverse("admin:boson_django_quarantinedfingerprint_changelist"),
                          {"action": "release_selected", "index": 0, "_selected_action": [fp.pk]})
    assert [job_id for _, job_id, _, _ in _entries()] == [store.quarantined]


def test_pausing_a_paused_queue_says_so_and_logs_nothing(superuser_client, store):
    from boson_django import services

    assert services.pause_queue("q-failed") is True and services.pause_queue("q-failed") is False
    url = reverse("admin:boson_django_queue_changelist")
    response = superuser_client.post(url, {"action": "pause_selected", "index": 0,
                                           "_selected_action": ["q-failed", "q-available"]}, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["1 paused, 1 already paused"]
    response = superuser_client.post(reverse("admin:boson_django_queue_op", args=["q-failed", "pause"]), follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Queue q-failed already paused"]
    assert _entries() == [("root", "q-available", "Paused", CHANGE)]


def test_a_queue_page_offers_the_one_operation_its_state_allows(superuser_client, store):
    from boson_django import services

    page = superuser_client.get(reverse("admin:boson_django_queue_change", args=["q-failed"])).content.decode()
    assert "/op/pause/" in page and "/op/resume/" not in page
    services.pause_queue("q-failed")
    page = superuser_client.get(reverse("admin:boson_django_queue_change", args=["q-failed"])).content.decode()
    assert "/op/resume/" in page and "/op/pause/" not in page
    assert services.resume_queue("q-failed") is True and services.resume_queue("q-failed") is False
