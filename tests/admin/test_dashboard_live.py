"""The live dashboard: its page fetches the panels' HTML every few seconds (no reload);
that fragment is the page's panels, fresh, under the page's checks."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from boson_django import services
from boson_django.admin.dashboard import DashboardAdmin
from boson_django.services import Outcome
from tests.factories import admit_one, enqueue_one

pytestmark = pytest.mark.django_db

LIVE = "admin:boson_django_dashboard_live"


def cell(body: str, queue: str, state: str) -> str:
    row = re.search(rf'<th>(?:<a [^>]*>)?{re.escape(queue)}(?:</a>)?.*?</tr>', body, re.S).group(0)
    return re.search(rf'data-state="{state}"><a [^>]*>([^<]*)</a>', row).group(1)


def test_the_page_names_its_fragment_its_period_and_its_script(superuser_client):
    body = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    assert f'id="boson-live" data-url="{reverse(LIVE)}" data-every="{DashboardAdmin.refresh_ms}"' in body
    assert re.search(r'<script src="[^"]*boson_django/live\.js" defer></script>', body)
    assert "Refreshed every 5 s while this tab is shown" in body


def test_the_fragment_is_the_panels_alone_and_never_cached(superuser_client, store):
    response = superuser_client.get(reverse(LIVE))
    body = response.content.decode()
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    assert 'id="boson-matrix"' in body and 'id="boson-charts"' in body and "Store time" in body
    assert "<html" not in body and "<script" not in body and 'id="boson-live"' not in body


def test_a_cell_and_the_throughput_change_between_two_fetches(superuser_client, store_clock):
    enqueue_one(queue="mail")
    before = superuser_client.get(reverse(LIVE)).content.decode()
    assert (cell(before, "mail", "available"), cell(before, "mail", "completed")) == ("1", "0")
    enqueue_one(queue="mail")
    services.ack(admit_one("w1", ["mail"]).lease, Outcome.SUCCESS)
    after = superuser_client.get(reverse(LIVE)).content.decode()
    assert (cell(after, "mail", "available"), cell(after, "mail", "completed")) == ("1", "1")
    assert "0 completed" in before and "1 completed" in after, "the hour's throughput"


def test_the_fragment_asks_a_signed_out_browser_to_log_in(store_clock):
    response = Client().get(reverse(LIVE))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_what_the_fragment_shows_stays_escaped(superuser_client, store_clock):
    enqueue_one(queue="<script>alert(1)</script>")
    body = superuser_client.get(reverse(LIVE)).content.decode()
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
