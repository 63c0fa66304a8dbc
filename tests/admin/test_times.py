"""Every time the admin shows is in the active time zone and names it: the job page, the
dashboard, the bulk confirmation, the charts and the schedules list agree with Django's
own fields whatever ``TIME_ZONE`` is."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from boson_django.admin import dashboard, display
from tests.admin.conftest import make_job
from tests.factories import ADD

NEW_YORK = override_settings(TIME_ZONE="America/New_York")
#: The frozen store clock's 2030-01-01T00:00Z, in New York.
EVENING = "2029-12-31 19:00:00 EST"


def _job_page(client, job_id: str) -> str:
    return client.get(reverse("admin:boson_django_job_change", args=[job_id])).content.decode()


def test_a_time_is_shown_in_the_active_zone_and_named_by_it(store_clock):
    at = store_clock.now()
    assert display.when(at) == "2030-01-01 00:00:00 UTC"
    with NEW_YORK:
        assert display.when(at) == EVENING
        assert display.when(at, precise=True) == "2029-12-31 19:00:00.000000 EST"
        with timezone.override("Asia/Kolkata"):  # a zone a middleware activated for this request
            assert display.when(at) == "2030-01-01 05:30:00 IST"
    assert display.when(None) == "—"


@NEW_YORK
def test_the_job_page_shows_every_time_in_the_active_zone(superuser_client, store_clock):
    job_id = make_job("retryable", queue="mail", clock=store_clock)
    page = _job_page(superuser_client, job_id)
    assert "UTC" not in page
    assert f"<div class=\"readonly\">{EVENING}</div>" in page  # store time now, enqueued, started...
    assert "2029-12-31 19:00:" in page and "EST (due in" in page  # the backoff's due time
    assert f"<td>{EVENING}</td>" in page  # the attempts table


@NEW_YORK
def test_a_running_jobs_lease_and_progress_are_in_the_active_zone(superuser_client, store_clock):
    from boson_django import services

    job_id = make_job("running", queue="mail", clock=store_clock)
    lease = services.LeaseRef(job_id, 1)
    services.write_progress(lease, 1, 2, "half")
    page = _job_page(superuser_client, job_id)
    assert "UTC" not in page
    assert f"half (attempt 1, fence 1, at {EVENING})" in page
    assert "2029-12-31 19:00:30 EST (in 30s)" in page  # the lease's expiry


@NEW_YORK
def test_the_dashboard_names_the_zone_of_its_store_time_and_charts(superuser_client, store_clock):
    page = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    assert f"Store time {EVENING}." in page and "UTC" not in page
    hour_chart = dashboard.charts_context(store_clock.now())["charts"][0]
    assert hour_chart.x_ticks[0][1] == "18:01"  # 23:01 UTC, the hour's first minute


@NEW_YORK
def test_the_bulk_confirmation_names_the_zone_of_its_snapshot(superuser_client, store_clock):
    job_id = make_job("failed", queue="mail", clock=store_clock)
    data = {"action": "retry_selected", "index": 0, "select_across": 1, "_selected_action": [job_id],
            "snapshot": store_clock.now().isoformat()}
    page = superuser_client.post(reverse("admin:boson_django_job_changelist"), data).content.decode()
    assert f"(enqueued by {EVENING}, store time)" in page


@pytest.fixture
def nightly(settings, store_clock):
    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"nightly": {"task": ADD, "cron": "0 3 * * *", "args": [1, 2]}}}


@NEW_YORK
def test_the_schedule_list_shows_the_next_run_in_the_active_zone(superuser_client, nightly):
    page = superuser_client.get(reverse("admin:boson_django_storedschedule_changelist")).content.decode()
    assert "2029-12-31 22:00:00 EST (in 3h 00m)" in page, "03:00 UTC is 22:00 in New York"


@NEW_YORK
@pytest.mark.parametrize("changelist, state, column, sortable", [
    ("job", "failed", "run_at", True), ("failedjob", "failed", "finalized_at", True),
    ("lease", "running", "lease_expires_at", True), ("run", "running", "started_at", False),
])
def test_list_columns_show_times_to_the_second_in_the_named_zone(superuser_client, store_clock, changelist, state,
                                                                 column, sortable):
    """Django's list format ("Dec. 31, 2029, 7 p.m.") has no seconds and no zone name. (A
    no-break space keeps the zone with the time when a narrow column wraps the cell.)"""
    make_job(state, queue="mail", clock=store_clock)
    page = superuser_client.get(reverse(f"admin:boson_django_{changelist}_changelist")).content.decode()
    shown = r"2029-12-31 19:00:\d\d\N{NO-BREAK SPACE}EST"
    cell = rf'<td class="field-{column}">{shown}</td>|<th class="field-{column}"><a href="[^"]*">{shown}</a></th>'  # or its link
    assert re.search(cell, page), page
    assert "p.m." not in page
    (header,) = re.findall(rf'<th scope="col" class="([^"]*)column-{column}([^"]*)"', page)
    assert ("sortable" in "".join(header)) is sortable


def test_a_time_column_still_sorts_by_its_field(superuser_client, store_clock):
    early = make_job("failed", queue="mail", clock=store_clock)
    store_clock.advance(5000)
    late = make_job("failed", queue="mail", clock=store_clock)
    url = reverse("admin:boson_django_job_changelist")
    run_at = 5  # its place in the changelist's columns (the action checkbox first)

    def order(o: str) -> list[str]:
        page = superuser_client.get(url, {"o": o}).content.decode()
        return sorted([early, late], key=page.index)

    assert order(str(run_at)) == [early, late]
    assert order(f"-{run_at}") == [late, early]


@NEW_YORK
def test_every_row_page_shows_its_times_in_the_named_zone(superuser_client, store_clock):
    """The pages of runs, queues, buckets, duties and quarantined fingerprints, where
    Django's format had no seconds and no zone name."""
    from boson_django import services
    from boson_django.models import QuarantinedFingerprint, Run

    make_job("completed", queue="mail", clock=store_clock)
    services.pause_queue("mail")
    services.set_rate_limit("smtp", 1, 60_000)
    services.claim_duty("boson.promote", "w1", 60_000)
    make_job("quarantined", queue="poison", clock=store_clock)
    pages = [("run", Run.objects.get(queue="mail").pk), ("queue", "mail"), ("bucket", "smtp"),
             ("duty", "boson.promote"), ("quarantinedfingerprint", QuarantinedFingerprint.objects.get().pk)]
    for model, pk in pages:
        page = superuser_client.get(reverse(f"admin:boson_django_{model}_change", args=[pk])).content.decode()
        assert re.search(r'<div class="readonly">2029-12-31 19:00:\d\d EST</div>', page), model
        assert "p.m." not in page, model


def test_relative_times_are_measured_on_the_store_clock(superuser_client, far_clock):
    """Three days from real time, a due time, a lease and a duty are still "in 1h 00m",
    "in 30s" and "in 1m 00s": measured from store time, not from the server's own clock."""
    from datetime import timedelta

    from boson_django import services
    from tests.factories import admit_one, enqueue_one

    due = enqueue_one(ADD, args=[1, 2], queue="later", run_at=far_clock.now() + timedelta(hours=1))
    enqueue_one(queue="now")
    running = admit_one(queues=["now"], lease_ms=30_000).lease.job_id
    services.claim_duty("boson.promote", "node-a", 60_000)
    assert "(due in 1h 00m)" in _job_page(superuser_client, due)
    assert "(in 30s)" in _job_page(superuser_client, running)
    far_clock.advance(25_000)  # five seconds left: near expiry
    body = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    leases = body.split('id="boson-leases"')[1]
    assert running in leases and "<td>in 5s</td>" in leases
    assert "in 35s" in body  # the duty
    duties = superuser_client.get(reverse("admin:boson_django_duty_changelist")).content.decode()
    assert "<td class=\"field-expires_in\">35s</td>" in duties
