"""A real worker's ``--metrics-port``: loopback unless told otherwise, and parallel scrapes
cost the database a session or two, not one each."""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from boson_django import services
from tests.factories import NOOP, envelope
from tests.faults.support import Worker

SCRAPES = 40
#: Sessions (PostgreSQL) or open database files (SQLite) that scrapes may add to an idle
#: worker's: the one read at a time, and the one closing as the next opens.
EXTRA_AT_MOST = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """The local addresses (hex, as the kernel lists them) with a socket listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def _store_sessions(worker_pid: int) -> int:
    """Database sessions open on the test store: PostgreSQL's backends of this database,
    SQLite's open handles of the store's file in the worker process."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            return cursor.fetchone()[0]
    store = os.path.realpath(connection.settings_dict["NAME"])
    fds = Path(f"/proc/{worker_pid}/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.path.realpath(fd) == store
        except OSError:  # closed meanwhile
            pass
    return count


def _for_a_second() -> Iterator[None]:
    """Sample for a second (twenty of the worker's idle polls): its own sessions come and go."""
    until = time.monotonic() + 1.0
    while time.monotonic() < until:
        yield
        time.sleep(0.01)


def _scrape(port: int) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
        return response.status, response.read().decode()


@pytest.fixture
def metered_worker(transactional_db, tmp_path):
    """An idle worker serving metrics on a free port (default address), up and scraped once."""
    services.enqueue([envelope(NOOP, queue="metered-idle")])  # a queue the worker does not work
    port = _free_port()
    worker = Worker(tmp_path, "w-metrics", "--metrics-port", str(port), "--queue", "elsewhere")
    try:
        worker.wait_for_line(f"metrics on http://127.0.0.1:{port}/metrics")
        assert _scrape(port)[0] == 200
        yield worker, port
    finally:
        worker.cleanup()


def test_the_metrics_port_listens_on_loopback_only_by_default(metered_worker):
    worker, port = metered_worker
    assert _listening(port) == {"0100007F"}, "listening beyond 127.0.0.1"
    assert "reachable from other machines" not in worker.text()


def test_parallel_scrapes_share_a_session_or_two(metered_worker):
    """40 scrapes at once: every one answers with the store's gauges, and the worker holds
    at most a couple more sessions than when idle (each scrape opened its own: 60 parallel
    scrapes held 63 sessions)."""
    worker, port = metered_worker
    idle = max(_store_sessions(worker.pid) for _ in _for_a_second())
    start = threading.Barrier(SCRAPES + 1)
    answers: list[tuple[int, str]] = []
    failures: list[BaseException] = []

    def scrape() -> None:
        start.wait()
        try:
            answers.append(_scrape(port))
        except BaseException as exc:  # noqa: BLE001 -- reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=scrape) for _ in range(SCRAPES)]
    for thread in threads:
        thread.start()
    start.wait()
    busiest = idle
    while any(t.is_alive() for t in threads):
        busiest = max(busiest, _store_sessions(worker.pid))
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    assert [status for status, _ in answers] == [200] * SCRAPES
    assert all("boson_store_up 1.0" in body and 'boson_jobs{queue="metered-idle",state="available"} 1.0' in body
               for _, body in answers)
    assert busiest <= idle + EXTRA_AT_MOST, f"{busiest} sessions while scraping, {idle} idle"


def test_another_address_is_served_when_asked_for_with_a_warning(transactional_db, tmp_path):
    port = _free_port()
    worker = Worker(tmp_path, "w-exposed", "--metrics-port", str(port), "--metrics-addr", "0.0.0.0", "--burst")
    assert worker.exit_code() == 0, worker.text()
    assert f"metrics on http://0.0.0.0:{port}/metrics" in worker.text()
    assert f"the metrics port 0.0.0.0:{port} is reachable from other machines, with no authentication" in worker.text()
