"""Real-browser fixtures: Debian's headless chromium, driven by selenium through the system
chromedriver, against pytest-django's live server (with the admin's static files served).

Without /usr/bin/chromium, /usr/bin/chromedriver or selenium the tests are skipped -- except
in CI (``CI`` set to anything but empty/0/false), where a missing browser fails them: CI
installs it, so a skip there would hide a broken setup.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test.utils import override_settings

from tests.ci import in_ci

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 10  # explicit waits; a page normally answers in well under a second


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} not found (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="package")
def browser_available() -> None:
    reason = missing_browser()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"browser tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"browser tests need a browser: {reason}")


@pytest.fixture(scope="package")
def live_server(request: pytest.FixtureRequest, browser_available: None) -> Iterator[Any]:
    """pytest-django's live server, overridden for this folder so the admin's CSS and JS load.

    The test settings set no STATIC_URL (the test client never fetches static files), so
    templates would link relative paths; here STATIC_URL is set for this package only and the
    server thread uses staticfiles' finder-based handler (the app directories' ``static/``).
    """
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from pytest_django.live_server_helper import LiveServer

    addr = request.config.getvalue("liveserver") or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS") or "localhost"
    with override_settings(STATIC_URL="/static/"):
        server = LiveServer(addr, start=False)
        server.thread.static_handler = StaticFilesHandler
        server.start()
        yield server
        server.stop()


@pytest.fixture(scope="package")
def driver(browser_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless chromium for the package (starting one takes about a second)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The system chromedriver, never a downloaded one (selenium-manager is not consulted
    # when the service names an executable).
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


def favicon_404(entry: dict[str, Any]) -> bool:
    """Chromium asks every site for /favicon.ico by itself; the admin declares none and the
    test URLconf serves none. That request's 404 is the browser's, not the page's."""
    message = entry.get("message", "")
    return entry.get("source") == "network" and message.split(" ", 1)[0].endswith("/favicon.ico") and "404" in message


class Browser:
    """The driver plus the live server's URL and the checks every page gets."""

    def __init__(self, driver: Any, base_url: str):
        self.driver = driver
        self.base_url = base_url
        self.visited: list[str] = []

    def get(self, path: str) -> None:
        self.driver.get(self.base_url + path)
        self.loaded()

    def loaded(self) -> None:
        """Wait for the document to finish loading, then check the console."""
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, WAIT_S).until(lambda d: d.execute_script("return document.readyState") == "complete")
        self.visited.append(self.driver.current_url)
        self.assert_no_console_errors()

    def assert_no_console_errors(self) -> None:
        # get_log drains the buffer: each call sees what happened since the previous one.
        severe = [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE" and not favicon_404(e)]
        assert severe == [], f"JavaScript console errors on {self.driver.current_url}: {severe}"

    def wait_for(self, css: str) -> Any:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, WAIT_S).until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def click_and_wait(self, element: Any) -> None:
        """Click something that submits or navigates; wait until the old page is gone."""
        from selenium.webdriver.support.ui import WebDriverWait

        element.click()
        WebDriverWait(self.driver, WAIT_S).until(lambda _driver: gone(element))
        self.loaded()

    def login(self, username: str, password: str) -> None:
        """Through the admin's real login form."""
        from selenium.webdriver.common.by import By

        self.driver.delete_all_cookies()
        self.get("/admin/login/?next=/admin/")
        self.driver.find_element(By.ID, "id_username").send_keys(username)
        self.driver.find_element(By.ID, "id_password").send_keys(password)
        self.click_and_wait(self.driver.find_element(By.CSS_SELECTOR, "#login-form input[type=submit], #login-form button[type=submit]"))
        self.wait_for("#user-tools")


def gone(element: Any) -> bool:
    """Whether ``element`` no longer belongs to the page shown. Asked while the next page
    loads, ChromeDriver sometimes answers "Node with given id does not belong to the
    document" (an unknown error) instead of a stale reference: that is gone too."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False


@pytest.fixture
def browser(driver: Any, live_server: Any) -> Iterator[Browser]:
    """A superuser logged in through the login form; every page visited is checked for
    console errors, and once more at the end of the test."""
    driver.get_log("browser")  # whatever an earlier test left in the buffer is not this test's
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):  # fast login
        User.objects.create_superuser("root", password="pw")
        page = Browser(driver, live_server.url)
        page.login("root", "pw")
    yield page
    page.assert_no_console_errors()
