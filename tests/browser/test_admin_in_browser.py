"""The admin in a real browser: the bulk retry flow end to end, the dashboard's charts and a
job's detail page, each page with zero JavaScript console errors."""

from __future__ import annotations

import pytest

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # the fixtures skip the tests with the reason (and fail them in CI)
    pass

from boson_django import services
from boson_django.models import Job
from boson_django.services import Envelope, Outcome
from tests.browser.conftest import WAIT_S
from tests.factories import ADD, NOOP

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRACEBACK = 'Traceback (most recent call last):\n  File "tasks.py", line 7, in add\n    return a + b\nTypeError: unsupported operand type(s)'


def failed_jobs(n: int, queue: str = "mail") -> list[str]:
    """``n`` jobs driven through the services into ``failed`` (one attempt each)."""
    ids = [r.id for r in services.enqueue([Envelope(task=NOOP, queue=queue, max_attempts=1, args=[i]) for i in range(n)])]
    units = services.admit("w1", [queue], n)
    assert len(units) == n
    for unit in units:
        services.ack(unit.lease, Outcome.RETRY, error=TRACEBACK, logs=["starting", "giving up"])
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {"failed"}
    return ids


def job_with_attempts(attempts: int = 3) -> str:
    """A job that failed ``attempts`` times, each with a traceback and log lines."""
    (result,) = services.enqueue([Envelope(task=ADD, queue="math", max_attempts=attempts, args=[1, "2"])])
    for n in range(1, attempts + 1):
        services.promote_due(10)  # retryable -> available (a worker's sweep does this)
        (unit,) = services.admit("worker-a", ["math"], 1)
        services.ack(unit.lease, Outcome.RETRY, delay_ms=0, error=TRACEBACK,
                     logs=[f"attempt {n}: adding 1 and '2'", f"attempt {n}: failed"])
    return result.id


def test_select_all_bulk_retry_confirm_and_message(browser):
    """More failed jobs than one page holds: select-all, then "Select all 60", the retry
    action, the confirmation page with its count, confirm, the message; all 60 available."""
    ids = failed_jobs(60)
    d = browser.driver
    browser.get("/admin/boson_django/failedjob/")
    assert len(d.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 50  # one page

    d.find_element(By.ID, "action-toggle").click()
    WebDriverWait(d, WAIT_S).until(lambda _: all(b.is_selected() for b in d.find_elements(By.CSS_SELECTOR, "input.action-select")))
    across = browser.wait_for(".actions .question a")  # shown by actions.js once a whole page is selected
    assert "60" in across.text
    across.click()
    browser.wait_for(".actions .all")
    assert d.find_element(By.CSS_SELECTOR, "input.select-across").get_attribute("value") == "1"

    Select(d.find_element(By.CSS_SELECTOR, ".actions select[name=action]")).select_by_value("retry_selected")
    browser.click_and_wait(d.find_element(By.CSS_SELECTOR, ".actions button[name=index]"))

    confirm = browser.wait_for("#content form input[type=submit]")
    assert confirm.get_attribute("value") == "Yes, retry 60 failed jobs"
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {"failed"}  # not yet
    browser.click_and_wait(confirm)

    message = browser.wait_for("ul.messagelist li.success")
    assert message.text == "60 retried"
    assert set(Job.objects.filter(id__in=ids).values_list("state", flat=True)) == {"available"}
    assert {services.job_state(i)[1] for i in ids} == {"available"}
    # Back on the failed list, which is now empty.
    assert "/admin/boson_django/failedjob/" in d.current_url
    assert d.find_elements(By.CSS_SELECTOR, "#result_list tbody tr") == []


def test_dashboard_charts_render_with_a_size(browser):
    failed_jobs(3, queue="reports")
    services.enqueue([Envelope(task=NOOP, queue="mail") for _ in range(5)])
    d = browser.driver
    browser.get("/admin/boson_django/dashboard/")
    charts = WebDriverWait(d, WAIT_S).until(ec.presence_of_all_elements_located((By.CSS_SELECTOR, "svg.boson-chart")))
    assert len(charts) == 4
    for chart in charts:
        size = chart.size
        assert size["width"] > 0 and size["height"] > 0, (chart.get_attribute("aria-label"), size)
        assert chart.is_displayed()
    # Something was drawn: the failures just recorded are a polyline in the hour chart.
    assert d.find_elements(By.CSS_SELECTOR, "svg.boson-chart polyline")
    # The queue x state table links to the filtered lists; follow one.
    link = d.find_element(By.CSS_SELECTOR, "a[href*='queue=reports'][href*='state=failed']")
    browser.click_and_wait(link)
    assert len(d.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 3


def test_job_detail_shows_every_attempt(browser):
    job_id = job_with_attempts(3)
    d = browser.driver
    browser.get(f"/admin/boson_django/job/{job_id}/change/")
    browser.wait_for("#boson-attempts")
    assert len(d.find_elements(By.CSS_SELECTOR, "#boson-attempts tr.boson-run")) == 3
    errors = d.find_elements(By.CSS_SELECTOR, "#boson-attempts pre.boson-error")
    assert len(errors) == 3 and "TypeError" in errors[0].text
    assert "attempt 3: failed" in d.find_element(By.ID, "boson-attempts").text
    # The per-job retry button works from the page (the job failed after 3 attempts).
    browser.click_and_wait(d.find_element(By.CSS_SELECTOR, "button.boson-op-retry"))
    browser.wait_for("ul.messagelist li")
    assert services.job_state(job_id)[1] == "available"
