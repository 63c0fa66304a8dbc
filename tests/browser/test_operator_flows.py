"""An operator's first minutes, in a real browser: find a job by its task's name, read
why a job failed without scrolling, and watch the dashboard change without a reload
(and stop fetching while its tab is hidden). Every list fits 1280 px."""

from __future__ import annotations

import pytest

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # the fixtures skip the tests with the reason (and fail them in CI)
    pass

from boson_django import services
from boson_django.admin.dashboard import DashboardAdmin
from boson_django.services import Envelope, Outcome
from tests.browser.conftest import WAIT_S
from tests.factories import ADD, NOOP, SEND_MAIL

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ERROR = ("smtplib.SMTPRecipientsRefused: {'bob@example.com': (550, b'User unknown')}\n"
         "Traceback (most recent call last):\n  File \"shop/tasks.py\", line 41, in send_mail\n")


def failed_mail() -> str:
    (job,) = services.enqueue([Envelope(task=SEND_MAIL, queue="mail", max_attempts=1, args=["bob@example.com"])])
    (unit,) = services.admit("web-3:4100", ["mail"], 1)
    services.ack(unit.lease, Outcome.RETRY, error=ERROR)
    return job.id


def cell(driver, queue: str, state: str) -> str:
    return driver.execute_script(
        "const row = [...document.querySelectorAll('#boson-matrix tbody tr')]"
        "  .find(r => r.querySelector('th').textContent.trim() === arguments[0]);"
        "return row ? row.querySelector(`td[data-state='${arguments[1]}']`).textContent.trim() : null;", queue, state)


def test_search_finds_jobs_by_a_part_of_their_task_s_name(browser):
    mail = failed_mail()
    services.enqueue([Envelope(task=NOOP, queue="mail"), Envelope(task=ADD, queue="math", args=[1, 2])])
    d = browser.driver
    browser.get("/admin/boson_django/job/")
    assert len(d.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 3
    box = d.find_element(By.ID, "searchbar")
    box.send_keys("SEND_M")
    old = d.find_element(By.ID, "result_list")
    box.send_keys(Keys.ENTER)
    WebDriverWait(d, WAIT_S).until(lambda _: old not in d.find_elements(By.ID, "result_list"))
    browser.loaded()
    rows = d.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 1 and SEND_MAIL in rows[0].find_element(By.CSS_SELECTOR, ".boson-cut-task").get_attribute("title")
    browser.click_and_wait(rows[0].find_element(By.CSS_SELECTOR, "th a"))
    assert mail in d.current_url


def test_a_failed_job_s_page_shows_why_without_scrolling_and_retries_it(browser):
    job_id = failed_mail()
    d = browser.driver
    browser.get(f"/admin/boson_django/job/{job_id}/change/")
    summary = browser.wait_for("#boson-failure")
    bottom = d.execute_script("return arguments[0].getBoundingClientRect().bottom", summary)
    assert bottom <= d.execute_script("return window.innerHeight"), "the whole panel in the first screen"
    assert "smtplib.SMTPRecipientsRefused" in summary.text and "Traceback" not in summary.text
    assert "no attempts left" in summary.text
    assert not d.find_elements(By.CSS_SELECTOR, "a.closelink")
    browser.click_and_wait(summary.find_element(By.CSS_SELECTOR, "button.boson-op-retry"))
    assert browser.wait_for("ul.messagelist li").text == "1 retried"
    assert services.job_state(job_id)[1] == "available"
    assert not d.find_elements(By.ID, "boson-failure"), "available: nothing to explain"


@pytest.fixture
def refresh_every(monkeypatch):
    def every(ms: int) -> None:
        monkeypatch.setattr(DashboardAdmin, "refresh_ms", ms)
    return every


def test_the_dashboard_refreshes_its_cells_without_a_reload(browser, refresh_every):
    refresh_every(1000)  # the script's shortest period
    services.enqueue([Envelope(task=NOOP, queue="mail")])
    d = browser.driver
    browser.get("/admin/boson_django/dashboard/")
    assert (cell(d, "mail", "available"), cell(d, "mail", "completed")) == ("1", "0")
    d.execute_script("window.bosonSamePage = true")
    services.enqueue([Envelope(task=NOOP, queue="mail") for _ in range(2)])
    for unit in services.admit("w1", ["mail"], 2):
        services.ack(unit.lease, Outcome.SUCCESS)
    WebDriverWait(d, WAIT_S).until(lambda _: cell(d, "mail", "completed") == "2")
    assert cell(d, "mail", "available") == "1"
    assert "2 completed" in d.find_element(By.ID, "boson-summary").text, "the hour's throughput"
    assert d.execute_script("return window.bosonSamePage") is True, "no reload"
    assert int(d.find_element(By.ID, "boson-live").get_attribute("data-refreshes")) >= 1


def _show(driver, state: str) -> None:
    """What a browser does when its tab is hidden or shown again (headless, it is never)."""
    driver.execute_script("Object.defineProperty(document, 'visibilityState', {value: arguments[0], configurable: true});"
                          "document.dispatchEvent(new Event('visibilitychange'));", state)


def test_a_hidden_dashboard_schedules_no_fetch_and_refreshes_once_shown(browser, refresh_every):
    """A period of a minute: whatever changes the cell within the test is the refresh of
    a tab shown again, not the next tick."""
    refresh_every(60_000)
    services.enqueue([Envelope(task=NOOP, queue="mail")])
    d = browser.driver
    browser.get("/admin/boson_django/dashboard/")
    live = d.find_element(By.ID, "boson-live")
    assert live.get_attribute("data-paused") is None
    _show(d, "hidden")
    assert live.get_attribute("data-paused") == "true"
    services.enqueue([Envelope(task=NOOP, queue="mail") for _ in range(4)])
    assert cell(d, "mail", "available") == "1"
    _show(d, "visible")
    WebDriverWait(d, WAIT_S).until(lambda _: cell(d, "mail", "available") == "5")
    assert live.get_attribute("data-paused") is None and live.get_attribute("data-refreshes") == "1"


@pytest.mark.parametrize("page", ["job", "failedjob", "quarantinedjob", "lease", "run"])
def test_every_list_fits_1280_px(browser, live_clock, page):
    """Long names in every column: each list's rows, a job in each of its states."""
    failed_mail()
    long_queue = "a-queue-with-a-rather-long-name-for-a-narrow-column"
    worker = "worker-on-a-host-with-a-long-name:12345"
    services.set_task_config(ADD, crash_limit=1)
    services.enqueue([Envelope(task=ADD, queue=long_queue, args=[1, 2], lease_ms=1000)])
    services.admit(worker, [long_queue], 1)
    live_clock.advance(1001)
    services.reclaim_expired(10)  # quarantined
    services.enqueue([Envelope(task=NOOP, queue=long_queue) for _ in range(2)])
    done, _running = services.admit(worker, [long_queue], 2)
    services.ack(done.lease, Outcome.SUCCESS)
    d = browser.driver
    d.set_window_size(1280, 900)
    browser.get(f"/admin/boson_django/{page}/")
    width, room = d.execute_script("const r = document.querySelector('#changelist .results');"
                                   "return [r.scrollWidth, r.clientWidth];")
    assert width <= room, f"{page}: {width} px of columns in {room} px"
