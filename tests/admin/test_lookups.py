"""List pages filter only by their declared filters: a free lookup on a payload or text
column is refused (400) before it reaches the database; every link the admin builds into
a filtered list still opens it."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from boson_django import services
from tests.factories import ADD, admit_one, enqueue_one

pytestmark = pytest.mark.django_db

#: Lookups that made the database scan payloads, errors and logs (each answered 200).
FREE_LOOKUPS = [
    ("job", "kwargs__token__startswith=a"),
    ("job", "last_error__iregex=.*boom"),
    ("job", "args__contains=1"),
    ("job", "meta__trace_context__isnull=false"),
    ("failedjob", "last_error__icontains=boom"),
    ("quarantinedjob", "checkpoint__step=1"),
    ("lease", "kwargs__token=a"),
    ("run", "error__iregex=boom"),
    ("run", "logs__icontains=line"),
    ("queue", "name__iregex=q"),
    ("bucket", "name__regex=s"),
    ("duty", "holder__iregex=node"),
    ("taskconfig", "task__iregex=add"),
    ("quarantinedfingerprint", "fingerprint__startswith=a"),
    ("storedschedule", "kwargs__contains=1"),
]


def _boson_admins() -> list[str]:
    return sorted(model._meta.model_name for model in admin.site._registry
                  if model._meta.app_label == "boson_django" and model._meta.model_name != "dashboard")


@pytest.mark.parametrize("model, query", FREE_LOOKUPS, ids=[f"{m}?{q}" for m, q in FREE_LOOKUPS])
def test_a_lookup_no_filter_declares_is_refused_and_queries_nothing(superuser_client, store, model, query):
    url = reverse(f"admin:boson_django_{model}_changelist") + "?" + query
    with CaptureQueriesContext(connection) as queries:
        response = superuser_client.get(url)
    assert response.status_code == 400
    column = f'"{query.split("__")[0]}"'
    filtered = [q["sql"] for q in queries if column in q["sql"].partition(" WHERE ")[2]]
    assert not filtered, "the lookup reached the database"


@pytest.mark.parametrize("model", _boson_admins())
def test_every_boson_list_refuses_an_undeclared_lookup(superuser_client, model):
    response = superuser_client.get(reverse(f"admin:boson_django_{model}_changelist") + "?pk__regex=.")
    assert response.status_code == 400


def test_every_boson_admin_is_checked_here():
    assert {m for m, _ in FREE_LOOKUPS} == set(_boson_admins())


@pytest.fixture
def links_store(store, store_clock):
    services.set_rate_limit("smtp", 10, 1000, 20)
    services.set_task_config(ADD, max_attempts=7)
    services.claim_duty("sweep", "node-1", 5000)
    enqueue_one(ADD, queue="more", args=[1, 1])
    services.ack(admit_one("w1", ["more"]).lease, services.Outcome.SUCCESS, logs=["done"])
    return store


def _links(body: str, within: str) -> list[str]:
    """The links of a page into ``within`` that carry a query string, unescaped."""
    return sorted({html.unescape(h) for h in re.findall(r'href="([^"#]*\?[^"#]*)', body)
                   if h.startswith("?") or h.startswith(within)})


def _opens(client, url: str) -> None:
    """200: neither refused (400) nor sent to Django's "?e=1" (a 302 for bad parameters)."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)


#: The lists with the most links to follow: slow (make test-slow); the others stay in make test.
MANY_LINKS = {"job", "failedjob", "quarantinedjob", "lease"}


@pytest.mark.parametrize("model", [pytest.param(model, marks=pytest.mark.slow) if model in MANY_LINKS else model
                                   for model in _boson_admins()])
def test_every_filter_sort_and_page_link_of_a_list_still_opens_it(superuser_client, links_store, model):
    url = reverse(f"admin:boson_django_{model}_changelist")
    links = _links(superuser_client.get(url).content.decode(), url)
    for link in links:
        _opens(superuser_client, url + link if link.startswith("?") else link)
    # a declared filter's link is followed through its own links too (the sidebar keeps it)
    for link in [ln for ln in links if "=" in ln][:3]:
        page = superuser_client.get(url + link if link.startswith("?") else link).content.decode()
        for inner in _links(page, url):
            _opens(superuser_client, url + inner if inner.startswith("?") else inner)


def test_the_job_list_has_filter_links_to_check(superuser_client, links_store):
    url = reverse("admin:boson_django_job_changelist")
    links = _links(superuser_client.get(url).content.decode(), url)
    assert {"?state__exact=failed", "?queue=q-failed", f"?task={ADD}"} <= set(links), links


@pytest.mark.slow
def test_every_filtered_list_link_of_the_dashboard_opens_its_list(superuser_client, links_store):
    body = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    links = _links(body, "/admin/boson_django/")
    assert any("state=" in link and "queue=" in link for link in links), links
    for link in links:
        _opens(superuser_client, link)
    filtered = superuser_client.get(reverse("admin:boson_django_job_changelist") + "?queue=q-failed&state=failed")
    assert [job.id for job in filtered.context["cl"].result_list] == [links_store.failed]


def test_a_queue_page_s_jobs_link_and_a_task_page_s_runs_link_open_their_lists(superuser_client, links_store):
    page = superuser_client.get(reverse("admin:boson_django_queue_change", args=["q-failed"])).content.decode()
    (jobs,) = _links(page, reverse("admin:boson_django_job_changelist"))
    listed = superuser_client.get(jobs)
    assert listed.status_code == 200 and [j.id for j in listed.context["cl"].result_list] == [links_store.failed]
    page = superuser_client.get(reverse("admin:boson_django_taskconfig_change", args=[ADD])).content.decode()
    (runs,) = _links(page, reverse("admin:boson_django_run_changelist"))
    listed = superuser_client.get(runs)
    assert listed.status_code == 200 and listed.context["cl"].result_count >= 1
