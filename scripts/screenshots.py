"""Take the README's job-detail screenshot with headless chromium (run by hand; not in CI).

    python scripts/screenshots.py                    # docs/img/job_detail.png
    python scripts/screenshots.py --out /tmp/shots   # somewhere else

(docs/img/dashboard.png is not retaken by this script: it needs a day of seeded traffic.)

Needs /usr/bin/chromium, /usr/bin/chromedriver (Debian: apt-get install chromium
chromium-driver) and selenium (in the ``test`` extra). Uses the test settings on a fresh,
throwaway SQLite file, a frozen store clock (so the pictures are reproducible), Django's live
server thread with the admin's static files, and a superuser logged in through the login form.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
AT = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
WIDTH = 1280
MAX_HEIGHT = 1700
START = "fieldset:nth-of-type(5)"  # the Lease fieldset, then progress, data and attempts

#: As a worker writes an error: ``dotted.Class: message``, then the traceback.
TRACEBACK = """{module}{name}: {message}
Traceback (most recent call last):
  File "shop/tasks.py", line 41, in send_mail
    connection.send_messages([message])
  File "django/core/mail/backends/smtp.py", line 128, in send_messages
    new_conn_created = self.open()
{name}: {message}"""
#: (module prefix of the class's path, class, message), as ``TRACEBACK`` takes them.
ERRORS = (
    ("builtins.", "TimeoutError", "timed out"),
    ("builtins.", "ConnectionRefusedError", "[Errno 111] Connection refused"),
    ("", "smtplib.SMTPServerDisconnected", "Connection unexpectedly closed"),
)


def setup_django(workdir: str) -> None:
    os.environ["BOSON_TEST_DB"] = "sqlite"
    os.environ["BOSON_SQLITE_PATH"] = os.path.join(workdir, "screenshots.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed_job_detail() -> str:
    """A send_mail job on its fourth attempt: three failed tries (traceback, log lines), a
    lease held now with progress and a checkpoint."""
    from boson_django import clock, services
    from boson_django.services import Envelope, Outcome

    (job,) = services.enqueue([Envelope(task="tests.testapp.tasks.send_mail", queue="mail", max_attempts=5,
                                        args=["ada@example.com"], kwargs={}, lease_ms=60_000)])
    for n, (wait_ms, error) in enumerate(zip((4_000, 17_000, 61_000), ERRORS), start=1):
        (unit,) = services.admit(f"web-1:{4100 + n}", ["mail"], 1)
        clock.advance(850 + 40 * n)
        module, name, message = error
        services.ack(unit.lease, Outcome.RETRY, error=TRACEBACK.format(module=module, name=name, message=message), logs=[
            "INFO shop.tasks: rendering order-confirmation for ada@example.com",
            "INFO shop.tasks: connecting to smtp.example.com:587",
            f"WARNING shop.tasks: {message} (try {n})",
        ])
        clock.advance(wait_ms)
        services.promote_due(10)
    (unit,) = services.admit("web-2:5120", ["mail"], 1)
    services.checkpoint(unit.lease, {"rendered": True, "message_id": "<20300101.1200@shop.example.com>"})
    services.write_progress(unit.lease, 2, 3, "sending")
    clock.advance(7_500)
    return job.id


def serve_and_shoot(job_id: str, out: Path, start: str | None) -> None:
    from django.contrib.auth.models import User
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test.testcases import LiveServerThread
    from django.test.utils import override_settings
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    User.objects.create_superuser("root", password="pw")
    with override_settings(STATIC_URL="/static/", ALLOWED_HOSTS=["localhost"]):
        server = LiveServerThread("localhost", static_handler=StaticFilesHandler)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise server.error
        base = f"http://localhost:{server.port}"
        profile = tempfile.mkdtemp(prefix="boson-shots-")
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-first-run", "--hide-scrollbars", f"--window-size={WIDTH},900", f"--user-data-dir={profile}"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            driver.get(base + "/admin/login/?next=/admin/")
            driver.find_element(By.ID, "id_username").send_keys("root")
            driver.find_element(By.ID, "id_password").send_keys("pw")
            driver.find_element(By.CSS_SELECTOR, "#login-form [type=submit]").click()
            WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "user-tools"))
            shoot(driver, f"{base}/admin/boson_django/job/{job_id}/change/", out / "job_detail.png", start or None)
        finally:
            driver.quit()
            server.terminate()


def shoot(driver, url: str, path: Path, start: str | None = None) -> None:
    """A WIDTH-wide PNG of the page from the top (or from the element ``start``), at most
    MAX_HEIGHT tall."""
    import base64

    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
    top = 0 if start is None else driver.execute_script(
        "return Math.floor(document.querySelector(arguments[0]).getBoundingClientRect().top + window.scrollY)", start)
    bottom = driver.execute_script("return document.documentElement.scrollHeight")
    clip = {"x": 0, "y": top, "width": WIDTH, "height": min(MAX_HEIGHT, bottom - top), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"{path}: {clip['width']}x{clip['height']}, {path.stat().st_size // 1024} KB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="directory for the PNG (default: docs/img)")
    parser.add_argument("--start", default=START, help=f"CSS selector of the element the picture starts at (default: {START})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="boson-shots-db-") as workdir:
        setup_django(workdir)
        from boson_django import clock

        clock.freeze(AT - timedelta(minutes=3))
        job_id = seed_job_detail()
        serve_and_shoot(job_id, args.out, args.start)


if __name__ == "__main__":
    main()
