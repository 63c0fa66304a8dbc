"""Job ids the admin must quote in its URLs (``_`` becomes ``_5F``, ``/`` becomes ``_2F``):
a job's page, its buttons and its links act on that job and no other."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from boson_django import services
from boson_django.services import Outcome
from tests.factories import admit_one, enqueue_one, state_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def look_alikes(store_clock):
    """``a_b`` waiting, and ``a_5Fb`` -- the quoted form of ``a_b`` -- failed."""
    waiting = enqueue_one(id="a_b", queue="mail")
    failed = enqueue_one(id="a_5Fb", queue="other", max_attempts=1)
    services.ack(admit_one(queues=["other"]).lease, Outcome.RETRY, error="Traceback: boom of a_5Fb")
    assert (state_of(waiting), state_of(failed)) == ("available", "failed")
    return waiting, failed


def _page(client, job_id: str) -> str:
    return client.get(reverse("admin:boson_django_job_change", args=[quote(job_id)])).content.decode()


def test_a_jobs_page_shows_its_own_buttons_and_attempts(superuser_client, look_alikes):
    page = _page(superuser_client, "a_b")
    assert "/op/cancel/" in page and "/op/retry/" not in page, "the buttons of a_b (available), not of a_5Fb"
    assert "boom of a_5Fb" not in page


def test_a_button_acts_on_the_job_whose_page_it_is_on(superuser_client, look_alikes):
    response = superuser_client.post(reverse("admin:boson_django_job_op", args=[quote("a_b"), "cancel"]))
    assert response.status_code == 302
    assert (state_of("a_b"), state_of("a_5Fb")) == ("cancelled", "failed")
    response = superuser_client.post(reverse("admin:boson_django_job_op", args=[quote("a_5Fb"), "retry"]))
    assert response.status_code == 302
    assert state_of("a_5Fb") == "available"


def test_loaded_output_is_the_jobs_own(superuser_client, store_clock):
    job_id = enqueue_one(id="x/y_z")
    unit = admit_one()
    services.write_output(unit.lease, {"rows": 41})
    url = reverse("admin:boson_django_job_change", args=[quote(job_id)])
    page = superuser_client.get(url + "?load=output").content.decode()
    assert "41" in page and "No output." not in page


def test_links_to_a_job_lead_to_that_job(superuser_client, look_alikes):
    """The runs list links each run's job; a link to ``a_5Fb`` must not open ``a_b``."""
    right = reverse("admin:boson_django_job_change", args=[quote("a_5Fb")])
    wrong = reverse("admin:boson_django_job_change", args=["a_5Fb"])
    page = superuser_client.get(reverse("admin:boson_django_run_changelist")).content.decode()
    assert f'href="{right}"' in page and f'href="{wrong}"' not in page


def test_the_dashboards_links_quote_ids_and_queue_names(superuser_client, store_clock):
    enqueue_one(id="j_5F1", queue="bulk_2Fmail")
    page = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    assert reverse("admin:boson_django_queue_change", args=[quote("bulk_2Fmail")]) in page
    assert reverse("admin:boson_django_job_change", args=[quote("j_5F1")]) in page, "the queue's oldest waiting job"
