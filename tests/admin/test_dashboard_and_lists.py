"""Dashboard numbers against services.counts(), filters, escaping, capped counts, query budgets."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from boson_django import services
from boson_django.admin import paginator
from tests.factories import admit_one, enqueue_one

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:boson_django_dashboard_changelist"


def _cells(body: str) -> dict[tuple[str, str], str]:
    found = {}
    for queue, state, label in re.findall(r'href="/admin/boson_django/job/\?queue=([^&"]+)&amp;state=(\w+)">([^<]+)</a>', body):
        found[(queue, state)] = label
    return found


def test_dashboard_cells_match_services_counts_and_link_to_filtered_lists(superuser_client, store):
    body = superuser_client.get(reverse(DASHBOARD)).content.decode()
    cells = _cells(body)
    for queue in [f"q-{s}" for s in ("failed", "running", "completed", "quarantined")]:
        for state, n in services.counts(queue=queue).items():
            assert cells[(queue, state)] == str(n), (queue, state)
    listed = superuser_client.get(reverse("admin:boson_django_job_changelist") + "?queue=q-failed&state=failed").content.decode()
    assert store.failed in listed and store.available not in listed


def test_dashboard_shows_paused_badges_oldest_waiting_and_throughput(superuser_client, store, store_clock):
    services.pause_queue("q-available")
    store_clock.advance(90_000)
    body = superuser_client.get(reverse(DASHBOARD)).content.decode()
    assert "paused</span>" in body
    assert reverse("admin:boson_django_job_change", args=[store.available]) in body
    assert re.search(r">1m 3\ds</a>", body)  # the oldest available job has waited ~90 s of store time
    assert "1 completed · 1 retried · 1 failed" in body  # the acks of the store fixture
    assert body.count("<polyline") >= 3


def test_dashboard_flags_leases_about_to_expire(superuser_client, store, store_clock):
    store_clock.advance(29_000)  # default lease 30 s: one second left
    body = superuser_client.get(reverse(DASHBOARD)).content.decode()
    assert reverse("admin:boson_django_job_change", args=[store.running]) in body.split('id="boson-leases"')[1]


@pytest.mark.parametrize("query, present, absent", [
    ("?state=failed", "failed", "available"),
    ("?queue=q-running", "running", "failed"),
    ("?task=tests.testapp.tasks.add", "quarantined", "failed"),
])
def test_job_filters(superuser_client, store, query, present, absent):
    body = superuser_client.get(reverse("admin:boson_django_job_changelist") + query).content.decode()
    assert getattr(store, present) in body and getattr(store, absent) not in body


def test_run_filters_and_search(superuser_client, store):
    url = reverse("admin:boson_django_run_changelist")
    body = superuser_client.get(url + "?outcome=retry").content.decode()
    assert store.failed in body and store.completed not in body
    body = superuser_client.get(url + "?outcome=open").content.decode()
    assert store.running in body and store.failed not in body
    body = superuser_client.get(url + f"?q={store.completed}").content.decode()
    assert store.completed in body and store.failed not in body


def test_triage_lists_show_only_their_state(superuser_client, store):
    failed = superuser_client.get(reverse("admin:boson_django_failedjob_changelist")).content.decode()
    assert store.failed in failed and store.cancelled not in failed
    quarantined = superuser_client.get(reverse("admin:boson_django_quarantinedjob_changelist")).content.decode()
    assert store.quarantined in quarantined and store.failed not in quarantined
    assert "release_selected" in quarantined and "cancel_selected" not in quarantined, "a release is the only way out"
    leases = superuser_client.get(reverse("admin:boson_django_lease_changelist")).content.decode()
    assert store.running in leases and store.available not in leases


def test_job_detail_shows_attempts_newest_first_and_loads_result_on_request(superuser_client, store_clock):
    job_id = enqueue_one(queue="d", max_attempts=3)
    services.ack(admit_one(queues=["d"]).lease, "retry", error="Traceback: first", logs=["first line"])
    store_clock.advance(60_000)
    services.promote_due(10)
    services.ack(admit_one(queues=["d"]).lease, "success", logs=["second line"], result={"answer": 42})
    url = reverse("admin:boson_django_job_change", args=[job_id])
    body = superuser_client.get(url).content.decode()
    attempts = body.split('id="boson-attempts"')[1]
    assert attempts.index("second line") < attempts.index("Traceback: first") < attempts.index("first line")
    assert "answer" not in body  # the result is not loaded by default
    assert "&#x27;answer&#x27;: 42" in superuser_client.get(url + "?load=result").content.decode()


def test_everything_shown_is_escaped(superuser_client, store_clock):
    evil = "<script>alert(1)</script>"
    job_id = enqueue_one(queue=evil, args=[evil], meta={"k": evil})
    services.ack(admit_one(queues=[evil]).lease, "retry", error=evil, logs=[evil])
    services.claim_duty(evil[:50], evil, 5000)
    pages = [
        reverse(DASHBOARD),
        reverse("admin:boson_django_job_changelist"),
        reverse("admin:boson_django_job_change", args=[job_id]),
        reverse("admin:boson_django_queue_changelist"),
        reverse("admin:boson_django_run_changelist"),
        reverse("admin:boson_django_duty_changelist"),
    ]
    for url in pages:
        body = superuser_client.get(url).content.decode()
        assert "<script>alert(1)" not in body, url
        assert "&lt;script&gt;alert(1)" in body, url


@pytest.mark.parametrize("evil", ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>'])
def test_what_tasks_handlers_and_enqueuers_control_is_escaped_on_every_page_and_message(superuser_client, store_clock, settings, evil):
    """Beyond the test above: results, output, progress, checkpoint, keys, rate classes,
    worker ids, schedules, fingerprints, task configs; the run page, action messages and
    the "all matching" confirmation."""
    from django.contrib.admin.utils import quote

    from boson_django.models import QuarantinedFingerprint, Run
    from boson_django.schedules import sync_schedules
    from tests.factories import ADD

    settings.BOSON = {**settings.BOSON, "SCHEDULES": {evil: {"task": ADD, "cron": "0 3 * * *", "args": [evil, 1]}}}
    sync_schedules()
    services.set_rate_limit(evil, 10, 1000)
    services.set_task_config(ADD, crash_limit=1)
    services.set_task_config(evil, max_attempts=2, warn_unregistered=False)
    job_id = enqueue_one(ADD, queue=evil, args=[evil, 1], unique_key=evil, rate_class=evil, fingerprint=evil)
    unit = admit_one(evil, [evil])
    services.write_progress(unit.lease, 1, 2, message=evil)
    services.write_output(unit.lease, {"o": evil})
    services.checkpoint(unit.lease, {"c": evil})
    services.ack(unit.lease, "success", result={"r": evil}, logs=[evil])
    parked = enqueue_one(ADD, queue=evil, args=[evil, 2], lease_ms=1000, fingerprint=evil)
    admit_one(evil, [evil])
    store_clock.advance(1001)
    services.reclaim_expired(10)  # quarantined: its fingerprint parks later copies
    job = reverse("admin:boson_django_job_change", args=[quote(job_id)])
    pages = [job, job + "?load=result", job + "?load=output",
             reverse("admin:boson_django_job_change", args=[quote(parked)]),
             reverse("admin:boson_django_run_change", args=[Run.objects.filter(job_id=job_id).get().pk]),
             reverse("admin:boson_django_storedschedule_change", args=[quote(evil)]),
             reverse("admin:boson_django_bucket_change", args=[quote(evil)]),
             reverse("admin:boson_django_taskconfig_change", args=[quote(evil)]),
             reverse("admin:boson_django_quarantinedfingerprint_change",
                     args=[quote(QuarantinedFingerprint.objects.get().pk)])]
    pages += [reverse(f"admin:boson_django_{m}_changelist")
              for m in ("storedschedule", "bucket", "taskconfig", "quarantinedfingerprint", "quarantinedjob", "lease")]
    bodies = [superuser_client.get(url).content.decode() for url in pages]
    bodies += [superuser_client.post(reverse(f"admin:boson_django_{m}_changelist"), data, follow=True).content.decode()
               for m, data in [
                   ("storedschedule", {"action": "run_now_selected", "_selected_action": [evil]}),
                   ("queue", {"action": "pause_selected", "_selected_action": [evil]}),
                   ("job", {"action": "cancel_selected", "_selected_action": [job_id, evil], "select_across": "1",
                            "index": 0, "snapshot": store_clock.now().isoformat()}),
               ]]
    bodies.append(superuser_client.post(reverse("admin:boson_django_queue_op", args=[quote(evil), "resume"]),
                                        follow=True).content.decode())
    for url, body in zip(pages + ["run now", "pause", "confirm", "resume"], bodies):
        assert evil not in body, url
        assert escape(evil) in body, url


def test_capped_paginator_says_cap_plus(monkeypatch, superuser_client, store_clock):
    monkeypatch.setattr(paginator.CappedPaginator, "cap", 3)
    services.enqueue([services.Envelope(task="tests.testapp.tasks.noop", queue="many") for _ in range(5)])
    body = superuser_client.get(reverse("admin:boson_django_job_changelist")).content.decode()
    assert "3+ jobs" in body


def test_job_changelist_query_budget_does_not_grow_with_jobs(superuser_client, store_clock, django_assert_max_num_queries, django_capture_on_commit_callbacks):
    services.enqueue([services.Envelope(task="tests.testapp.tasks.noop", queue=f"q{i % 5}") for i in range(300)])
    url = reverse("admin:boson_django_job_changelist")
    superuser_client.get(url)  # warm the session
    with django_assert_max_num_queries(10) as captured:
        assert superuser_client.get(url + "?queue=q1").status_code == 200
    sql = " ".join(q["sql"] for q in captured.captured_queries).lower()
    assert "distinct" not in sql
    assert '"args"' not in sql and '"kwargs"' not in sql  # no payload columns in the list
    counts = [q["sql"] for q in captured.captured_queries if "count(" in q["sql"].lower() and "boson_job" in q["sql"]]
    assert counts and all("limit" in q.lower() for q in counts)  # every count over jobs is capped


@pytest.mark.parametrize("model", ["run", "lease", "failedjob", "quarantinedjob"])
def test_other_lists_query_budget(superuser_client, store, model, django_assert_max_num_queries):
    url = reverse(f"admin:boson_django_{model}_changelist")
    superuser_client.get(url)
    with django_assert_max_num_queries(10):
        superuser_client.get(url)


def test_dashboard_query_budget(superuser_client, store, django_assert_max_num_queries):
    url = reverse(DASHBOARD)
    superuser_client.get(url)
    with django_assert_max_num_queries(12) as captured:
        superuser_client.get(url)
    for q in captured.captured_queries:
        sql = q["sql"].lower()
        if "count(" in sql and "boson_job" in sql:
            assert "limit" in sql, sql


def test_dashboard_totals_count_every_queue_not_only_the_rows_shown(db, store_clock, monkeypatch):
    """The table shows the first queues by name; its totals, and the running and
    quarantined figures at a glance, are the whole store's."""
    from boson_django import services
    from boson_django.admin import dashboard, stats
    from tests.factories import NOOP, enqueue_one

    monkeypatch.setattr(stats, "MAX_QUEUES", 2)
    for queue in ("a", "b", "zz", "zz"):
        enqueue_one(NOOP, queue=queue)
    assert len(services.admit("w", ["zz"], 1)) == 1
    context = dashboard.matrix_context(store_clock.now())
    assert context["more_queues"] and [row["queue"].name for row in context["rows"]] == ["a", "b"]
    assert context["running"] == "1"
    assert {t["state"]: t["label"] for t in context["state_totals"]}["available"] == "3"


def test_a_task_config_page_sums_up_the_task_s_recent_runs_and_links_to_them(superuser_client, store_clock):
    """The policy being tuned beside what it did in the last 24 hours (``task_run_stats``)."""

    from boson_django.services import Outcome
    from tests.factories import ADD

    services.set_task_config(ADD, max_active=3)
    url = reverse("admin:boson_django_taskconfig_change", args=[ADD])
    assert "none finished" in superuser_client.get(url).content.decode()
    enqueue_one(ADD, queue="stats", args=[0, 0])
    services.ack(admit_one("w1", ["stats"]).lease, Outcome.SKIP, error="E")
    store_clock.advance(25 * 3_600_000)  # that run is now outside the window
    for took_ms, outcome in ((40, Outcome.SUCCESS), (250, Outcome.SUCCESS), (10, Outcome.SKIP)):
        enqueue_one(ADD, queue="stats", args=[took_ms, 1])
        lease = admit_one("w1", ["stats"]).lease
        store_clock.advance(took_ms)
        services.ack(lease, outcome)
    body = superuser_client.get(url).content.decode()
    linked = re.search(r'<a href="([^"]+)">3 finished</a> \(2 success, 1 skip\); run time p50 40 ms, p95 250 ms', body)
    assert linked, body
    runs = html.unescape(linked.group(1))
    assert runs.startswith(reverse("admin:boson_django_run_changelist") + "?task=" + ADD)
    listed = superuser_client.get(runs)  # the runs of the same 24 hours, not the one before them
    assert listed.status_code == 200 and listed.context["cl"].result_count == 3


def test_a_task_s_uniqueness_is_edited_in_the_admin(superuser_client, store_clock):
    from boson_django.models import TaskConfig
    from tests.factories import ADD

    add_url = reverse("admin:boson_django_taskconfig_add")
    response = superuser_client.post(add_url, {"task": ADD, "uniqueness": "arguments"}, follow=True)
    assert response.status_code == 200 and TaskConfig.objects.get(task=ADD).uniqueness == "arguments"
    assert "arguments" in superuser_client.get(reverse("admin:boson_django_taskconfig_changelist")).content.decode()
    change_url = reverse("admin:boson_django_taskconfig_change", args=[ADD])
    superuser_client.post(change_url, {"task": ADD, "uniqueness": ""}, follow=True)
    assert TaskConfig.objects.get(task=ADD).uniqueness is None, "empty: as the code says"
    response = superuser_client.post(change_url, {"task": ADD, "uniqueness": "sometimes"})
    assert response.status_code == 200 and "uniqueness" in response.context["adminform"].form.errors


def test_the_lists_last_error_column_shows_the_exception_not_a_traceback_line(superuser_client, store_clock):
    """A worker stores ``dotted.Class: message`` and then the traceback: the column shows
    that first line, the one an operator triages by."""
    from boson_django.services import Outcome
    from boson_django.worker.outcomes import error_text

    try:
        raise ValueError("bad input 7")
    except ValueError as exc:
        error = error_text(exc)
    assert error.startswith("builtins.ValueError: bad input 7\nTraceback")
    enqueue_one(queue="triage", max_attempts=1)
    services.ack(admit_one("w1", ["triage"]).lease, Outcome.RETRY, error=error)
    for model in ("job", "failedjob"):
        body = superuser_client.get(reverse(f"admin:boson_django_{model}_changelist")).content.decode()
        cell = re.search(r'<td class="field-error_head_display">(.*?)</td>', body).group(1)
        assert cell == CUT_ERROR, (model, cell)


def test_the_runs_list_shows_each_run_s_duration_and_error(superuser_client, store_clock):
    """What the Runs page is for: which worker ran it, for how long, how it ended and why."""
    from boson_django.services import Outcome

    enqueue_one(queue="runs", max_attempts=3)
    lease = admit_one("w1", ["runs"]).lease
    store_clock.advance(1_250)
    services.ack(lease, Outcome.RETRY, error="builtins.ValueError: bad input 7\nTraceback (most recent call last):\n  ...")
    body = superuser_client.get(reverse("admin:boson_django_run_changelist")).content.decode()
    assert re.search(r'<td class="field-duration">1s</td>', body), "1.25 s of store time"
    cell = re.search(r'<td class="field-error_head_display">(.*?)</td>', body).group(1)
    assert cell == CUT_ERROR


#: The error's first line in a list cell, cut to the column's width and whole in its title.
CUT_ERROR = ('<span class="boson-cut boson-cut-error" title="builtins.ValueError: bad input 7">'
             'builtins.ValueError: bad input 7</span>')


def test_a_short_lease_is_about_to_expire_only_when_a_third_of_its_own_length_is_left(superuser_client, store_clock):
    """A task with a 3 s lease is renewed every second: freshly held, it is healthy, though
    it has less than a third of the default 30 s lease left."""
    from boson_django.admin import stats

    job_id = enqueue_one(queue="short", lease_ms=3_000)
    admit_one("w1", ["short"])
    assert [row["id"] for row in stats.leases_near_expiry(store_clock.now())] == []
    body = superuser_client.get(reverse(DASHBOARD)).content.decode()
    assert "Every lease has at least a third of its time left." in body
    store_clock.advance(2_100)  # 900 ms left: its holder missed its renewals
    assert [row["id"] for row in stats.leases_near_expiry(store_clock.now())] == [job_id]


def test_more_leases_about_to_expire_than_listed_say_so(superuser_client, store_clock, monkeypatch):
    """The card lists the first ``MAX_ROWS``; its count says when there are more."""
    from boson_django.admin import stats

    monkeypatch.setattr(stats, "MAX_ROWS", 2)
    for _ in range(3):
        enqueue_one(queue="stalled")
    assert len(services.admit("w1", ["stalled"], 3)) == 3
    store_clock.advance(31_000)  # every lease expired, none reclaimed yet
    body = superuser_client.get(reverse(DASHBOARD)).content.decode()
    assert re.search(r'<th>Leases about to expire</th><td class="num"><span class="boson-warn">2\+</span>', body)
    assert body.split('id="boson-leases"')[1].count("/admin/boson_django/job/") == 2


def test_a_job_s_progress_counts_as_the_handler_gave_them(superuser_client, store_clock):
    """``context.progress(3, 12)`` reads "3/12", not "3.0/12.0"; a fraction stays one."""
    enqueue_one(queue="progress")
    lease = admit_one("w1", ["progress"]).lease
    url = reverse("admin:boson_django_job_change", args=[lease.job_id])
    services.write_progress(lease, 3, 12, "day block 3")
    assert "3/12 day block 3 (attempt 1" in superuser_client.get(url).content.decode()
    services.write_progress(lease, 2.5, None, "MB")
    assert "2.5 MB (attempt 1" in superuser_client.get(url).content.decode()


@pytest.mark.parametrize("lease_ms, advance_ms, near", [
    (3_000, 1_999, False), (3_000, 2_000, True),  # 1,001 ms left; exactly a third left
    (1_000, 666, False), (1_000, 667, True),  # 334 ms left (over a third); 333 ms
    (1_000, 1_500, True),  # expired, not yet reclaimed
])
def test_a_lease_is_about_to_expire_from_exactly_a_third_of_its_own_length_left(store_clock, lease_ms, advance_ms, near):
    from boson_django.admin import stats

    job_id = enqueue_one(queue="edge", lease_ms=lease_ms)
    admit_one("w1", ["edge"])
    store_clock.advance(advance_ms)
    assert [row["id"] for row in stats.leases_near_expiry(store_clock.now())] == ([job_id] if near else [])
