"""Every admin page renders for the superuser and for a view-only staff user."""

from __future__ import annotations

import pytest
from django.urls import reverse

from boson_django import services
from boson_django.models import Run

pytestmark = pytest.mark.django_db

MODELS = ("job", "failedjob", "quarantinedjob", "lease", "run", "queue", "bucket", "duty", "taskconfig", "quarantinedfingerprint")


@pytest.fixture
def extras(store, store_clock):
    services.set_rate_limit("smtp", 10, 1000, 20)
    services.set_task_config("tests.testapp.tasks.noop", max_attempts=7)
    services.claim_duty("sweep", "node-1", 5000)


@pytest.mark.parametrize("who", ["superuser_client", "viewer_client"])
@pytest.mark.parametrize("model", MODELS)
def test_every_changelist_renders(request, who, model, extras):
    client = request.getfixturevalue(who)
    response = client.get(reverse(f"admin:boson_django_{model}_changelist"))
    assert response.status_code == 200, response.content[:500]


@pytest.mark.parametrize("who", ["superuser_client", "viewer_client"])
def test_every_change_page_renders(request, who, store, extras):
    client = request.getfixturevalue(who)
    pages = [("job", getattr(store, s)) for s in ("available", "running", "failed", "completed", "quarantined")]
    pages += [("failedjob", store.failed), ("quarantinedjob", store.quarantined), ("lease", store.running),
              ("run", Run.objects.first().pk), ("queue", "q-failed"), ("bucket", "smtp"), ("duty", "sweep"),
              ("taskconfig", "tests.testapp.tasks.noop")]
    for model, pk in pages:
        response = client.get(reverse(f"admin:boson_django_{model}_change", args=[pk]))
        assert response.status_code == 200, (model, response.content[:300])


@pytest.mark.parametrize("who", ["superuser_client", "viewer_client"])
def test_the_dashboard_renders(request, who, extras):
    response = request.getfixturevalue(who).get(reverse("admin:boson_django_dashboard_changelist"))
    assert response.status_code == 200
    assert b"<svg" in response.content


def test_the_sidebar_lists_triage_lists_and_the_dashboard(viewer_client, store):
    body = viewer_client.get(reverse("admin:boson_django_job_changelist")).content.decode()
    for model in ("failedjob", "quarantinedjob", "lease", "dashboard"):
        assert reverse(f"admin:boson_django_{model}_changelist") in body
