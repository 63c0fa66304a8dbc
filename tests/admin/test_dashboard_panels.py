"""The dashboard shows a user the panels whose pages that user may open, and reads
nothing for the others."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from boson_django import services
from tests.admin.conftest import staff_client

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:boson_django_dashboard_changelist"
#: panel -> (what marks it on the page, the table only it reads, the permission that shows it)
PANELS = {
    "duties": ('id="boson-duties"', "boson_duty", "view_duty"),
    "buckets": ('id="boson-buckets"', "boson_bucket", "view_bucket"),
    "fingerprints": ("Quarantined fingerprints", "boson_quarantined_fingerprint", "view_quarantinedfingerprint"),
    "runs": ('id="boson-charts"', "boson_throughput_minute", "view_run"),
}


@pytest.fixture
def busy(store):
    services.set_rate_limit("smtp", 10, 1000, 20)
    services.claim_duty("sweep", "node-1", 5000)
    return store


def _dashboard(client) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse(DASHBOARD))
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in queries]


def test_a_job_viewer_sees_the_jobs_panels_only_and_nothing_else_is_read(busy):
    body, queries = _dashboard(staff_client("jobs-only", ["view_job"]))
    assert 'id="boson-matrix"' in body and 'id="boson-leases"' in body and "Quarantined jobs" in body
    assert f'href="{reverse("admin:boson_django_job_changelist")}?queue=q-failed&amp;state=failed"' in body
    for panel, (mark, table, _) in PANELS.items():
        assert mark not in body, panel
        assert not [q for q in queries if f'"{table}"' in q], f"{panel}: {table} was read"
    assert reverse("admin:boson_django_queue_change", args=["q-failed"]) not in body, "a queue page it cannot open"
    assert ">q-failed</th>" in body or ">q-failed<" in body


@pytest.mark.parametrize("panel", list(PANELS))
def test_each_panel_shows_with_its_own_permission(busy, panel):
    mark, table, permission = PANELS[panel]
    body, queries = _dashboard(staff_client(f"with-{panel}", ["view_job", permission]))
    assert mark in body
    assert [q for q in queries if f'"{table}"' in q]
    assert all(other_mark not in body for other, (other_mark, _, _) in PANELS.items() if other != panel)


def test_a_user_with_every_view_permission_sees_every_panel(viewer_client, busy):
    body, _ = _dashboard(viewer_client)
    assert all(mark in body for mark, _, _ in PANELS.values())
    assert "node-1" in body and "smtp" in body
    assert reverse("admin:boson_django_queue_change", args=["q-failed"]) in body


def test_the_dashboard_stays_closed_without_the_job_view_permission(busy):
    client = staff_client("no-jobs", ["view_duty", "view_bucket", "view_run"])
    assert client.get(reverse(DASHBOARD)).status_code == 403
