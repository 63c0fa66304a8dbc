"""Actions go through the services and report what happened; bulk "all matching" confirms."""

from __future__ import annotations

import warnings

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from boson_django import services
from boson_django.admin import actions
from tests.admin.conftest import make_job
from tests.factories import state_of

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:boson_django_job_changelist"


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _post_action(client, action, ids, **extra):
    data = {"action": action, "index": 0, "_selected_action": ids, **extra}
    return client.post(reverse(CHANGELIST), data, follow=True)


def _all_matching(client, action: str, shown_at: str, query: str):
    """A confirmed "all matching" ``action`` on the job list filtered by ``query``, as a page
    shown at ``shown_at`` submits it."""
    data = {"action": action, "index": 0, "select_across": 1, "_selected_action": ["x"],
            "snapshot": shown_at, "boson_confirm": "yes"}
    return client.post(reverse(CHANGELIST) + "?" + query, data, follow=True)


def test_retry_selected_retries_failed_and_skips_the_rest(superuser_client, store):
    response = _post_action(superuser_client, "retry_selected", [store.failed, store.cancelled, store.completed, store.running])
    assert _messages(response) == ["2 retried, 2 skipped: not failed or cancelled"]
    assert state_of(store.failed) == state_of(store.cancelled) == "available"
    assert state_of(store.completed) == "completed" and state_of(store.running) == "running"


def test_cancel_selected_cancels_live_jobs(superuser_client, store):
    response = _post_action(superuser_client, "cancel_selected", [store.available, store.running, store.scheduled, store.completed])
    assert _messages(response) == ["3 cancelled, 1 skipped: already finished or quarantined"]
    assert {state_of(j) for j in (store.available, store.running, store.scheduled)} == {"cancelled"}


def test_release_selected_releases_quarantine(superuser_client, store):
    response = _post_action(superuser_client, "release_selected", [store.quarantined, store.failed])
    assert _messages(response) == ["1 released, 1 skipped: not quarantined"]
    assert state_of(store.quarantined) == "available"


def test_a_lost_race_is_reported_as_raced(store):
    """The list showed the job failed; someone retried it before the action ran."""
    services.retry(store.failed)
    tally = actions.apply(actions.RETRY, [(store.failed, "failed")])
    assert tally.message() == "0 retried, 1 raced (changed or deleted meanwhile)"


def test_a_vanished_job_counts_as_raced(store):
    tally = actions.apply(actions.RETRY, [("no-such-job", "failed")])
    assert (tally.done, tally.raced) == (0, 1)


def test_delete_selected_is_not_offered(superuser_client, store):
    body = superuser_client.get(reverse(CHANGELIST)).content.decode()
    assert "delete_selected" not in body
    assert "retry_selected" in body


def test_all_matching_asks_for_confirmation_with_a_count(superuser_client, store, store_clock):
    snapshot = store_clock.now().isoformat()
    url = reverse(CHANGELIST) + "?state=failed"
    data = {"action": "retry_selected", "index": 0, "select_across": 1, "_selected_action": [store.failed], "snapshot": snapshot}
    response = superuser_client.post(url, data)
    assert response.status_code == 200
    assert b"Yes, retry 1 jobs" in response.content
    assert state_of(store.failed) == "failed"  # nothing happened yet
    response = superuser_client.post(url, {**data, "boson_confirm": "yes"}, follow=True)
    assert _messages(response) == ["1 retried"]
    assert state_of(store.failed) == "available"


def test_all_matching_touches_only_jobs_that_existed_when_the_page_was_shown(superuser_client, store, store_clock):
    shown_at = store_clock.now().isoformat()
    store_clock.advance(1000)
    later = make_job("failed", queue="q-failed", clock=store_clock)
    response = _all_matching(superuser_client, "retry_selected", shown_at, "state=failed")
    assert _messages(response) == ["1 retried"]
    assert state_of(store.failed) == "available"
    assert state_of(later) == "failed"


@pytest.mark.parametrize("snapshot", ["", "yesterday", "2030-13-45T00:00:00+00:00", "2030-01-01T00:00:00"])
def test_all_matching_with_a_bad_snapshot_changes_nothing_and_says_why(superuser_client, store, snapshot):
    response = _all_matching(superuser_client, "retry_selected", snapshot, "state=failed")
    assert response.status_code == 200
    assert _messages(response) == ["The page's snapshot time is missing or unreadable; reload and try again."]
    assert state_of(store.failed) == "failed"


def test_the_changelist_carries_the_snapshot_time(superuser_client, store, store_clock):
    body = superuser_client.get(reverse(CHANGELIST)).content.decode()
    assert f'name="snapshot" value="{store_clock.now().isoformat()}"' in body


@pytest.mark.parametrize("op, state, after", [("retry", "failed", "available"), ("cancel", "available", "cancelled"), ("release", "quarantined", "available")])
def test_per_job_buttons_call_the_service(superuser_client, store, op, state, after):
    job_id = getattr(store, state)
    page = superuser_client.get(reverse("admin:boson_django_job_change", args=[job_id])).content.decode()
    url = reverse("admin:boson_django_job_op", args=[job_id, op])
    assert f'action="{url}"' in page
    response = superuser_client.post(url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:boson_django_job_change", args=[job_id])
    assert state_of(job_id) == after
    assert _messages(response)[0].startswith("1 ")


def test_a_per_job_button_on_the_wrong_state_reports_a_skip(superuser_client, store):
    response = superuser_client.post(reverse("admin:boson_django_job_op", args=[store.completed, "cancel"]), follow=True)
    assert _messages(response) == ["0 cancelled, 1 skipped: already finished or quarantined"]


def test_per_job_urls_refuse_get(superuser_client, store):
    assert superuser_client.get(reverse("admin:boson_django_job_op", args=[store.failed, "retry"])).status_code == 405


def test_queue_pause_and_resume(superuser_client, store):
    url = reverse("admin:boson_django_queue_changelist")
    response = superuser_client.post(url, {"action": "pause_selected", "index": 0, "_selected_action": ["q-failed", "q-available"]}, follow=True)
    assert _messages(response) == ["2 paused"]
    from boson_django.models import Queue

    assert set(Queue.objects.filter(paused=True).values_list("name", flat=True)) == {"q-failed", "q-available"}
    superuser_client.post(reverse("admin:boson_django_queue_op", args=["q-failed", "resume"]))
    assert not Queue.objects.get(name="q-failed").paused


def test_bucket_form_goes_through_set_rate_limit(superuser_client, store_clock):
    services.set_rate_limit("smtp", 10, 1000, 0)
    url = reverse("admin:boson_django_bucket_change", args=["smtp"])
    response = superuser_client.post(url, {"limit": 5, "window_ms": 2000, "burst": 8})
    assert response.status_code == 302, response.content[:2000]
    from boson_django.models import Bucket

    bucket = Bucket.objects.get(name="smtp")
    assert (bucket.limit, bucket.window_ms, bucket.burst, bucket.tokens) == (5, 2000, 8, 8)


@pytest.mark.parametrize("field, value", [("limit", 2**31), ("window_ms", 10**15), ("burst", 2**40)])
def test_bucket_form_refuses_what_set_rate_limit_refuses(superuser_client, store_clock, field, value):
    """Out of the service's range: a form error naming the field, not a server error."""
    from boson_django.models import Bucket

    data = {"name": "smtp", "limit": 5, "window_ms": 1000, "burst": 0, field: value}
    response = superuser_client.post(reverse("admin:boson_django_bucket_add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field], errors
    assert not Bucket.objects.exists()


def test_task_config_form_validates_like_the_service(superuser_client, db):
    url = reverse("admin:boson_django_taskconfig_add")
    response = superuser_client.post(url, {"task": "tests.testapp.tasks.noop", "priority": 500})
    assert response.status_code == 200 and b"priority" in response.content
    response = superuser_client.post(url, {"task": "tests.testapp.tasks.noop", "max_attempts": 4})
    assert response.status_code == 302
    from boson_django.models import TaskConfig

    assert TaskConfig.objects.get().max_attempts == 4


def test_a_task_config_for_an_unknown_task_is_saved_with_a_warning(superuser_client, db):
    """Configuring a task before it is deployed is allowed; a misspelt name is pointed out
    to the operator, once, and a warnings filter set to error (``-W error``) does not turn
    the save into a 500 that rolls it back."""
    url = reverse("admin:boson_django_taskconfig_add")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        response = superuser_client.post(url, {"task": "tests.testapp.tasks.nop", "max_active": 4}, follow=True)
        (said,) = [m for m in _messages(response) if "No task named" in m]
        assert "No task named 'tests.testapp.tasks.nop' is registered" in said
        assert "Did you mean 'tests.testapp.tasks.noop'?" in said
        response = superuser_client.post(url, {"task": "tests.testapp.tasks.add", "max_active": 4}, follow=True)
        assert not [m for m in _messages(response) if "No task named" in m]
        response = superuser_client.post(url, {"task": "<b>x</b>", "max_active": 4}, follow=True)
    assert b"&lt;b&gt;x&lt;/b&gt;&#x27; is registered" in response.content and b"<b>x</b>" not in response.content
    from boson_django.models import TaskConfig

    assert set(TaskConfig.objects.values_list("task", flat=True)) == {"tests.testapp.tasks.nop", "tests.testapp.tasks.add", "<b>x</b>"}


def test_release_fingerprint_releases_its_parked_jobs(superuser_client, store):
    from boson_django.models import QuarantinedFingerprint

    fp = QuarantinedFingerprint.objects.get()
    response = superuser_client.post(reverse("admin:boson_django_quarantinedfingerprint_changelist"),
                                     {"action": "release_selected", "index": 0, "_selected_action": [fp.pk]}, follow=True)
    assert _messages(response) == ["1 fingerprint released (1 job)"]
    assert state_of(store.quarantined) == "available"


def test_releasing_a_fingerprint_counts_fingerprints_then_the_jobs_they_freed(superuser_client, store):
    """The operator selected fingerprints: the message counts those, not "1 selected"
    jobs beside their parked copies."""
    from boson_django.models import QuarantinedFingerprint
    from tests.factories import ADD, enqueue_one

    copies = [enqueue_one(ADD, queue="q-quarantined", args=[1, 2]) for _ in range(2)]
    fp = QuarantinedFingerprint.objects.get()
    response = superuser_client.post(reverse("admin:boson_django_quarantinedfingerprint_changelist"),
                                     {"action": "release_selected", "index": 0, "_selected_action": [fp.pk]}, follow=True)
    assert _messages(response) == ["1 fingerprint released (3 jobs)"]
    assert {state_of(j) for j in [store.quarantined, *copies]} == {"available"}


def test_every_boson_changelist_is_exempt_from_atomic_requests():
    """A changelist runs bulk actions, and with ``ATOMIC_REQUESTS`` each service call must
    still commit by itself (see ``admin.base.own_transactions``): every boson admin's
    changelist URL carries the exemption Django's handler reads, overrides included."""
    from django.contrib import admin
    from django.db import connections
    from django.urls import resolve

    checked = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "boson_django":
            continue
        view = resolve(reverse(f"admin:boson_django_{model._meta.model_name}_changelist")).func
        assert set(connections) <= getattr(view, "_non_atomic_requests", set()), type(model_admin).__name__
        checked.append(type(model_admin).__name__)
    assert {"JobAdmin", "StoredScheduleAdmin", "DashboardAdmin"} <= set(checked)


@pytest.mark.parametrize("url", ["admin:boson_django_job_op", "admin:boson_django_queue_op", "admin:boson_django_storedschedule_op"])
def test_the_page_buttons_are_exempt_from_atomic_requests(url):
    """A job's, queue's or schedule's button calls one service, which commits by itself as
    a bulk action's chunks do, not inside the request's transaction."""
    from django.db import connections
    from django.urls import resolve

    view = resolve(reverse(url, args=["x", "cancel"])).func
    assert set(connections) <= getattr(view, "_non_atomic_requests", set())


@pytest.mark.parametrize("name", ["p_q", "x/y <b>?&%2F"])
def test_the_queue_page_buttons_work_for_names_the_admin_escapes(superuser_client, db, name):
    """The page's buttons post to the name's admin URL form (``_`` is ``_5F``)."""
    import html
    import re

    from django.contrib.admin.utils import quote

    from boson_django.models import Queue

    Queue.objects.create(name=name)
    page = superuser_client.get(reverse("admin:boson_django_queue_change", args=[quote(name)])).content.decode()
    (action,) = re.findall(r'action="([^"]*/op/pause/)"', page)
    response = superuser_client.post(html.unescape(action), follow=True)
    assert response.status_code == 200
    assert Queue.objects.get(name=name).paused


def test_releasing_a_job_counts_the_parked_copies_released_with_it(superuser_client, store, store_clock):
    """Its copies parked under the same fingerprint go with it, and the message says so."""
    from tests.factories import ADD, enqueue_one

    copies = [enqueue_one(ADD, queue="q-quarantined", args=[1, 2]) for _ in range(2)]
    assert {state_of(c) for c in copies} == {"quarantined"}
    response = _post_action(superuser_client, "release_selected", [store.quarantined])
    assert _messages(response) == ["3 released (1 selected, 2 quarantined copies)"]
    assert {state_of(j) for j in [store.quarantined, *copies]} == {"available"}


def test_a_retry_refused_for_a_held_unique_key_says_so(superuser_client, store_clock):
    """Not a lost race: a newer live job holds the key, and retrying would duplicate it."""
    from tests.factories import admit_one, enqueue_one

    old = enqueue_one(queue="uk", unique_key="k1", max_attempts=1)
    services.ack(admit_one("w1", ["uk"]).lease, "retry", error="x")
    enqueue_one(queue="uk", unique_key="k1")
    response = _post_action(superuser_client, "retry_selected", [old])
    assert _messages(response) == ["0 retried, 1 skipped: a live job holds its unique key"]
    assert state_of(old) == "failed"


def _fail_again(job_id: str) -> None:
    from tests.factories import admit_one

    unit = admit_one("w9", ["q-failed"])
    assert unit.lease.job_id == job_id
    services.ack(unit.lease, "discard", error="boom again")


def test_a_resubmitted_confirmation_leaves_alone_a_job_that_failed_again_since(superuser_client, store, store_clock):
    """A double click: the first submission retried the job, it failed again, and the
    second submission of the same page must not retry it once more."""
    shown_at = store_clock.now().isoformat()
    store_clock.advance(1000)
    assert _messages(_all_matching(superuser_client, "retry_selected", shown_at, "state=failed")) == ["1 retried"]
    store_clock.advance(1000)
    _fail_again(store.failed)
    response = _all_matching(superuser_client, "retry_selected", shown_at, "state=failed")
    assert _messages(response) == ["0 retried, 1 left alone: changed after the page was shown"]
    assert state_of(store.failed) == "failed"


def test_a_resubmitted_cancel_leaves_alone_a_job_retried_since(superuser_client, store, store_clock):
    shown_at = store_clock.now().isoformat()
    store_clock.advance(1000)
    assert _messages(_all_matching(superuser_client, "cancel_selected", shown_at, "queue=q-available")) == ["1 cancelled"]
    store_clock.advance(1000)
    services.retry(store.available)
    response = _all_matching(superuser_client, "cancel_selected", shown_at, "queue=q-available")
    assert _messages(response) == ["0 cancelled, 1 left alone: changed after the page was shown"]
    assert state_of(store.available) == "available"


def test_a_resubmitted_release_leaves_alone_a_job_quarantined_again_since(superuser_client, store, store_clock):
    shown_at = store_clock.now().isoformat()
    store_clock.advance(1000)
    assert _messages(_all_matching(superuser_client, "release_selected", shown_at, "state=quarantined")) == ["1 released"]
    from tests.factories import admit_one

    admit_one("w9", ["q-quarantined"])
    store_clock.advance(1001)
    services.reclaim_expired(10)
    assert state_of(store.quarantined) == "quarantined"
    response = _all_matching(superuser_client, "release_selected", shown_at, "state=quarantined")
    assert _messages(response) == ["0 released, 1 left alone: changed after the page was shown"]
    assert state_of(store.quarantined) == "quarantined"


def test_an_explicit_selection_resubmitted_leaves_alone_a_job_that_failed_again(superuser_client, store, store_clock):
    shown_at = store_clock.now().isoformat()
    store_clock.advance(1000)
    response = _post_action(superuser_client, "retry_selected", [store.failed], snapshot=shown_at)
    assert _messages(response) == ["1 retried"]
    store_clock.advance(1000)
    _fail_again(store.failed)
    response = _post_action(superuser_client, "retry_selected", [store.failed], snapshot=shown_at)
    assert _messages(response) == ["0 retried, 1 left alone: changed after the page was shown"]
    assert state_of(store.failed) == "failed"


def test_with_a_snapshot_a_job_in_a_refused_state_is_skipped_not_left_alone(superuser_client, store, store_clock):
    """A running job has no finalized_at: the transition table speaks first."""
    shown_at = store_clock.now().isoformat()
    response = _post_action(superuser_client, "retry_selected", [store.failed, store.running, store.completed], snapshot=shown_at)
    assert _messages(response) == ["1 retried, 2 skipped: not failed or cancelled"]


def test_the_bulk_limit_counts_only_jobs_the_action_can_move(superuser_client, store_clock, monkeypatch):
    """On a list mixing states, a limit counting skipped jobs stopped each run again at
    the same skipped jobs: the rest were never reached."""
    monkeypatch.setattr(actions, "BULK_LIMIT", 2)
    finished = [make_job("completed", queue="mixed", clock=store_clock) for _ in range(3)]
    waiting = [make_job("available", queue="mixed", clock=store_clock) for _ in range(3)]
    store_clock.advance(1000)
    shown_at = store_clock.now().isoformat()
    first = _messages(_all_matching(superuser_client, "cancel_selected", shown_at, "queue=mixed"))
    assert first == ["2 cancelled, 2+ skipped: already finished or quarantined, stopped at 2: run it again for the rest"]
    second = _messages(_all_matching(superuser_client, "cancel_selected", shown_at, "queue=mixed"))
    assert second == ["1 cancelled, 2+ skipped: already finished or quarantined"]
    assert {state_of(j) for j in waiting} == {"cancelled"} and {state_of(j) for j in finished} == {"completed"}


def test_selected_jobs_gone_from_a_triage_list_are_counted(superuser_client, store):
    """The Failed list shows failed jobs only: a resubmitted retry finds none of them."""
    url = reverse("admin:boson_django_failedjob_changelist")
    data = {"action": "retry_selected", "index": 0, "_selected_action": [store.failed]}
    assert _messages(superuser_client.post(url, data, follow=True)) == ["1 retried"]
    assert _messages(superuser_client.post(url, data, follow=True)) == ["0 retried, 1 no longer in this list"]


def test_copies_are_counted_in_the_singular_and_big_counts_with_separators():
    tally = actions.ActionResult(actions.RELEASE, done=1, copies=1)
    assert tally.message() == "2 released (1 selected, 1 quarantined copy)"
    assert actions.ActionResult(actions.CANCEL, done=12_000).message() == "12,000 cancelled"
