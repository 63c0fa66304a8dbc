"""The lists' search box: a job found by part of its task's name, its queue, the start of
its unique key or id, or the worker holding it; never by its payload or error."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from boson_django import services
from boson_django.admin import search
from boson_django.models import Job, Run
from boson_django.services import Outcome
from tests.factories import ADD, NOOP, SEND_MAIL, admit_one, enqueue_one

pytestmark = pytest.mark.django_db

JOBS = "admin:boson_django_job_changelist"


def found(client, q: str, changelist: str = JOBS, **params: str) -> list[str]:
    response = client.get(reverse(changelist), {"q": q, **params})
    assert response.status_code == 200, (q, response.status_code)
    return sorted(str(row.pk) for row in response.context["cl"].result_list)


@pytest.fixture
def shop(store_clock):
    """Jobs of three tasks over two queues; one failed with a unique key; one running on web-7."""
    ids = {
        "mail": enqueue_one(SEND_MAIL, id="0193a4b2-7c00-7000-8000-000000000001", queue="emails", args=["secret-token"]),
        "add": enqueue_one(ADD, id="0193a4b2-7d00-7000-8000-000000000002", queue="math", args=[1, 2]),
        "noop": enqueue_one(NOOP, id="0193a4b3-0000-7000-8000-000000000003", queue="math"),
        "keyed": enqueue_one(NOOP, id="0193a4b4-0000-7000-8000-000000000004", queue="bulk-emails", unique_key="order:1042",
                             max_attempts=1),
    }
    services.ack(admit_one("web-3:4100", ["bulk-emails"]).lease, Outcome.RETRY, error="Traceback: ValueError: needle")
    ids["running"] = enqueue_one(NOOP, id="0193a4b5-0000-7000-8000-000000000005", queue="slow")
    admit_one("web-7:5120", ["slow"])
    return ids


def test_a_part_of_a_task_name_in_any_case_finds_its_jobs(superuser_client, shop):
    assert found(superuser_client, "SEND_M") == [shop["mail"]]
    assert found(superuser_client, "testapp.tasks.n") == sorted([shop["noop"], shop["keyed"], shop["running"]])


def test_a_part_of_a_queue_name_finds_its_jobs(superuser_client, shop):
    assert found(superuser_client, "queue:emails") == sorted([shop["mail"], shop["keyed"]])
    assert found(superuser_client, "queue:bulk") == [shop["keyed"]]


def test_the_start_of_a_unique_key_finds_a_failed_job(superuser_client, shop):
    assert Job.objects.get(id=shop["keyed"]).state == "failed"  # outside the live-key constraint's index
    assert found(superuser_client, "order:1042") == [shop["keyed"]]
    assert found(superuser_client, "key:order:10") == [shop["keyed"]]
    assert found(superuser_client, "key:order:2") == []


def test_the_start_of_an_id_finds_the_jobs_it_starts(superuser_client, shop):
    assert found(superuser_client, "0193a4b2-7c") == [shop["mail"]]
    assert found(superuser_client, "id:0193a4b2-") == sorted([shop["mail"], shop["add"]])
    assert found(superuser_client, "0193a4b2") == sorted([shop["mail"], shop["add"]])
    assert found(superuser_client, shop["noop"]) == [shop["noop"]]
    assert found(superuser_client, "id:0193A4B2") == [], "an id's start is matched case and all"


def test_a_worker_finds_the_jobs_it_holds(superuser_client, shop):
    assert found(superuser_client, "worker:web-7") == [shop["running"]]
    assert found(superuser_client, "worker:web-3") == [], "it ran the failed job, but holds nothing now"
    assert found(superuser_client, "web-7:5120", "admin:boson_django_lease_changelist") == [shop["running"]]


def test_every_word_must_match_and_a_qualifier_names_its_field(superuser_client, shop):
    assert found(superuser_client, "tasks queue:math") == sorted([shop["add"], shop["noop"]])
    assert found(superuser_client, "task:add queue:math") == [shop["add"]]
    assert found(superuser_client, "task:math") == [], "a qualified word matches its field only"
    assert found(superuser_client, "'tasks.add' math") == [shop["add"]]


def test_payloads_errors_and_logs_are_not_searched(superuser_client, shop):
    assert found(superuser_client, "secret-token") == []
    assert found(superuser_client, "needle") == []


def test_each_job_list_searches_within_its_own_jobs(superuser_client, shop):
    assert found(superuser_client, "emails", "admin:boson_django_failedjob_changelist") == [shop["keyed"]]
    assert found(superuser_client, "math", "admin:boson_django_failedjob_changelist") == []
    assert found(superuser_client, "emails", state="available") == [shop["mail"]]


def test_the_runs_list_searches_by_task_job_id_and_a_worker_s_open_runs(superuser_client, shop):
    runs = "admin:boson_django_run_changelist"
    (keyed_run,), (running_run,) = _run_ids(shop["keyed"]), _run_ids(shop["running"])
    assert found(superuser_client, "testapp.tasks.noop", runs) == sorted([keyed_run, running_run])
    assert found(superuser_client, "0193a4b4", runs) == [keyed_run]
    assert found(superuser_client, "worker:web-7", runs) == [running_run]
    assert found(superuser_client, "worker:web-3", runs) == [], "a finished run's worker is not searched"


def _run_ids(job_id: str) -> list[str]:
    return [str(pk) for pk in Run.objects.filter(job_id=job_id).values_list("id", flat=True)]


@pytest.mark.parametrize("changelist", ["job", "failedjob", "quarantinedjob", "lease", "run"])
def test_a_search_opens_beside_each_list_s_filters(superuser_client, shop, changelist):
    """``q`` is the admin's own search parameter, not a lookup: never refused (400)."""
    url = reverse(f"admin:boson_django_{changelist}_changelist")
    assert superuser_client.get(url, {"q": "emails", "queue": "emails"}).status_code == 200
    assert superuser_client.get(url, {"q": "<script>alert(1)</script>"}).status_code == 200


def test_what_a_search_shows_stays_escaped(superuser_client, store_clock):
    enqueue_one(NOOP, queue="<b>q</b>")
    body = superuser_client.get(reverse(JOBS), {"q": '<img src=x onerror="alert(1)">'}).content.decode()
    assert "<img src=x" not in body and "&lt;img src=x" in body
    body = superuser_client.get(reverse(JOBS), {"q": "<b>"}).content.decode()
    assert "<b>q</b>" not in body and "&lt;b&gt;q&lt;/b&gt;" in body


STRINGS = ["ab", "ab-", "ab-1", "ab-9", "ab-z", "ab.", "ab0", "ab9", "ab9z", "aba", "abz", "abz-", "abZ", "abzz", "ab_x",
           "ab%x", "ac", "Ab-1", "AB9", "ab\u00e9", "a", "b"]


@pytest.mark.parametrize("prefix", ["a", "ab", "ab-", "ab-1", "ab9", "abz", "ab_", "ab%", "Ab", "ab\u00e9", "zz", "-"])
def test_starts_with_finds_exactly_the_strings_a_prefix_starts(store_clock, prefix):
    """Against the database's own ordering (its collation on PostgreSQL): the range it
    reads must hold every match, and the exact check must drop the rest."""
    for i, text in enumerate(STRINGS):
        enqueue_one(NOOP, id=f"{text}", queue="p", unique_key=f"k{i}")
    rows = Job.objects.filter(search.starts_with("id", prefix)).values_list("id", flat=True)
    assert sorted(rows) == sorted(s for s in STRINGS if s.startswith(prefix))


def test_distinct_values_reads_each_task_name_once_up_to_a_cap(store_clock):
    for task in (NOOP, ADD, SEND_MAIL, NOOP, ADD):
        enqueue_one(task, queue="d")
    assert search.distinct_values("boson_job", "task", "default") == sorted({NOOP, ADD, SEND_MAIL})
    assert search.distinct_values("boson_job", "task", "default", cap=2) == sorted({NOOP, ADD, SEND_MAIL})[:2]


@pytest.mark.parametrize("listed, sorted_", [(search.LISTED, search.SORTED), (6, search.SORTED), (3, search.SORTED), (3, 3)])
@pytest.mark.parametrize("q", ["tasks.add", "tasks.add queue:m"])
def test_a_search_lists_its_matches_newest_first_either_way(superuser_client, store_clock, monkeypatch, listed, sorted_,
                                                            q):
    """Terms matching at most LISTED rows are read as ids, the others applied as filters
    (the queue's 10 jobs are more than 6, the task's 5 are not; at 3 neither), sorted
    whole up to SORTED matches: the same page every way."""
    monkeypatch.setattr(search, "LISTED", listed)
    monkeypatch.setattr(search, "SORTED", sorted_)
    old = [enqueue_one(ADD, id=f"0000-old-{i}", queue="m", args=[i, i]) for i in range(5)]
    new = [enqueue_one(NOOP, id=f"9999-new-{i}", queue="m") for i in range(5)]
    enqueue_one(ADD, id="5555-elsewhere", queue="other", args=[0, 0])
    listed_ids = [row.pk for row in superuser_client.get(reverse(JOBS), {"q": q}).context["cl"].result_list]
    expected = old[::-1] if "queue" in q else ["5555-elsewhere", *old[::-1]]
    assert listed_ids == expected
    assert not set(new) & set(listed_ids)


@pytest.mark.parametrize("sorted_, whole", [(100, True), (3, False)])
def test_a_search_of_many_matches_sorts_them_whole_up_to_a_bound(superuser_client, store_clock, monkeypatch, sorted_,
                                                                 whole):
    """More matches than LISTED, at most SORTED: ordered by an expression the id index
    cannot walk, so the database reads them through the search's indexes and sorts."""
    monkeypatch.setattr(search, "LISTED", 3)
    monkeypatch.setattr(search, "SORTED", sorted_)
    ids = [enqueue_one(ADD, queue="m", args=[i, i]) for i in range(5)]
    with CaptureQueriesContext(connection) as queries:
        listed = [row.pk for row in superuser_client.get(reverse(JOBS), {"q": "task:add"}).context["cl"].result_list]
    assert listed == ids[::-1]
    page = [q["sql"] for q in queries if q["sql"].startswith('SELECT "boson_job"."id", "boson_job"."task"')]
    assert len(page) == 1 and ("COALESCE" in page[0].split("ORDER BY")[1]) is whole


def test_a_search_reads_no_payload_or_error_column(superuser_client, shop):
    with CaptureQueriesContext(connection) as queries:
        found(superuser_client, "emails")
    searched = [q["sql"].partition(" WHERE ")[2] for q in queries if '"boson_job"' in q["sql"]]
    for column in ('"args"', '"kwargs"', '"last_error"', '"meta"', '"checkpoint"'):
        assert not [where for where in searched if column in where], column


def test_the_dashboard_links_a_stalled_lease_s_holder_to_its_leases(superuser_client, store_clock):
    held = enqueue_one(NOOP, queue="stalled")
    admit_one("web-9:77", ["stalled"])
    store_clock.advance(31_000)  # expired, not reclaimed yet: listed as about to expire
    body = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    (link,) = re.findall(r'href="([^"]*\?q=worker[^"]*)"', body)
    assert link == reverse("admin:boson_django_lease_changelist") + "?q=worker%3Aweb-9%3A77"
    response = superuser_client.get(link)
    assert [row.pk for row in response.context["cl"].result_list] == [held]
