"""Take the README's screenshots from the live demo with headless chromium (by hand; not in CI).

    python scripts/screenshots.py                    # into docs/img
    python scripts/screenshots.py --out /tmp/shots   # somewhere else

Starts ``manage.py boson_demo`` (the example project's live mode: workers, the development
server, a steady trickle of the shop's jobs) on a throwaway SQLite file, waits until the store
holds thumbnails running with progress, failed and quarantined jobs (at most ``--wait``
seconds), logs into the admin as the ``admin`` user the demo prints, and saves:

* ``dashboard.png`` -- the dashboard, WIDTH px wide, down to its throughput charts;
* ``job_detail.png`` -- a bounced order email's page: the failure summary panel at the top;
* ``job_running.png`` -- a running thumbnail's page: its lease and progress.

The demo is stopped (as Ctrl-C stops it) before the script exits. The pictures show a real
run, so no two takes are the same. Needs /usr/bin/chromium, /usr/bin/chromedriver (Debian:
apt-get install chromium chromium-driver) and selenium (in the ``test`` extra).
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
WIDTH = 1280
#: The demo's header line with the admin's address and the password of its login.
LOGIN = re.compile(r"admin: (?P<url>http://\S+/admin/)\s+login: admin / (?P<password>\S+)")
#: The store is ready for the pictures when every count here is reached (and MIN_RUN_S passed,
#: so that the dashboard's charts have a few minutes to show).
WANT = {"running_with_progress": 2, "failed": 3, "quarantined": 1}
MIN_RUN_S = 45.0
COUNTS = """
    SELECT
      (SELECT COUNT(*) FROM boson_job j JOIN boson_job_data d ON d.job_id = j.id AND d.kind = 'progress'
        WHERE j.state = 'running' AND d.fence = j.fence),
      (SELECT COUNT(*) FROM boson_job WHERE state = 'failed'),
      (SELECT COUNT(*) FROM boson_job WHERE state = 'quarantined')
"""
BOUNCED = "SELECT id FROM boson_job WHERE state = 'failed' AND task = 'shop.tasks.send_order_email' ORDER BY id DESC"
#: On a job's page: true while the job runs.
IS_RUNNING = "[...document.querySelectorAll('.boson-badge')].some(b => b.textContent.trim() === 'running')"
RUNNING = """SELECT j.id FROM boson_job j JOIN boson_job_data d ON d.job_id = j.id AND d.kind = 'progress'
             WHERE j.state = 'running' AND d.fence = j.fence ORDER BY j.id"""


class Demo:
    """``manage.py boson_demo`` in a subprocess of its own, on the SQLite file ``db``."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.db = workdir / "demo.sqlite3"
        env = dict(os.environ, BOSON_DEMO_DB="sqlite", BOSON_DEMO_SQLITE=str(self.db), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        command = [sys.executable, "manage.py", "boson_demo", "--port", str(port), "--log-dir", str(workdir / "logs")]
        self.popen = subprocess.Popen(command, cwd=ROOT / "example_project", env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def login(self, deadline: float) -> tuple[str, str]:
        """The admin's address and the password the demo printed."""
        while time.monotonic() < deadline and self.popen.poll() is None:
            for line in self.lines:
                if found := LOGIN.search(line):
                    return found["url"], found["password"]
            time.sleep(0.2)
        raise SystemExit("the demo printed no admin login:\n" + "\n".join(self.lines))

    def query(self, sql: str) -> list[tuple]:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=20) as conn:
            return conn.execute(sql).fetchall()

    def wait_until_ready(self, started: float, deadline: float) -> None:
        """Until the store holds WANT and MIN_RUN_S passed; SystemExit at ``deadline``."""
        counts: dict[str, int] = {}
        while time.monotonic() < deadline and self.popen.poll() is None:
            counts = dict(zip(WANT, self.query(COUNTS)[0]))
            if time.monotonic() - started >= MIN_RUN_S and all(counts[k] >= n for k, n in WANT.items()):
                print(f"store ready after {time.monotonic() - started:.0f} s: {counts}")
                return
            time.sleep(1)
        raise SystemExit(f"the store never held {WANT} (last seen {counts}); demo output:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        """As Ctrl-C does: the demo stops its workers and the server, then exits. (SIGTERM,
        not SIGINT: a shell's background job ignores SIGINT, and so would the demo.)"""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(120)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--hide-scrollbars", f"--window-size={WIDTH},900", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def log_in(driver, admin: str, password: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(admin + "login/?next=/admin/")
    driver.find_element(By.ID, "id_username").send_keys("admin")
    driver.find_element(By.ID, "id_password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#login-form [type=submit]").click()
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "user-tools"))


def shoot(driver, url: str, path: Path, *, start: str | None = None, height: int,
          expect: str | None = None) -> bool:
    """A PNG of the page at most ``height`` tall: from its top, WIDTH wide; or from the
    element ``start``'s top left corner to the page's right edge. False (and no picture) when the script ``expect`` is false on the page."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
    if expect is not None and not driver.execute_script(f"return !!({expect})"):
        return False
    left, top = (0, 0) if start is None else driver.execute_script(
        "const box = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return [Math.max(0, Math.floor(box.left) - 8), Math.floor(box.top + window.scrollY) - 8]", start)
    bottom = driver.execute_script("return document.documentElement.scrollHeight")
    clip = {"x": left, "y": top, "width": WIDTH - left, "height": min(height, bottom - top), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"{path}: {clip['width']}x{clip['height']}, {path.stat().st_size // 1024} KB")
    return True


def take(demo: Demo, admin: str, password: str, out: Path, profile: str) -> None:
    driver = browser(profile)
    try:
        log_in(driver, admin, password)
        shoot(driver, admin + "boson_django/dashboard/", out / "dashboard.png", height=1160)
        (bounced, *_), *_ = demo.query(BOUNCED)
        shoot(driver, f"{admin}boson_django/job/{bounced}/change/", out / "job_detail.png", height=900)
        # A thumbnail runs for a few seconds: take the first still running when its page loads.
        for (job_id,) in demo.query(RUNNING):
            if shoot(driver, f"{admin}boson_django/job/{job_id}/change/", out / "job_running.png",
                     start="fieldset:nth-of-type(5)", height=405, expect=IS_RUNNING):
                return
        raise SystemExit("every running thumbnail finished before its page was taken; run again")
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="directory for the PNGs (default: docs/img)")
    parser.add_argument("--port", type=int, default=8790, help="the demo server's port (or the next free one)")
    parser.add_argument("--wait", type=float, default=180, help="give up when the store is not ready after this many seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="boson-shots-") as workdir:
        started = time.monotonic()
        demo = Demo(Path(workdir), args.port)
        try:
            admin, password = demo.login(started + 60)
            demo.wait_until_ready(started, started + args.wait)
            take(demo, admin, password, args.out, os.path.join(workdir, "chromium"))
        finally:
            demo.stop()


if __name__ == "__main__":
    main()
