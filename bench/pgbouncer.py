"""Drain rate and wake-up latency through PgBouncer, beside direct connections.

Starts Debian's ``pgbouncer`` (tests/faults/pgbouncer.py: a free loopback port, trust
auth) in session and in transaction pooling mode in front of PostgreSQL on 127.0.0.1,
database ``boson_bench_pgbouncer`` (created and migrated if missing). For each route a
real ``boson_worker`` subprocess and this process's enqueues both go that way:

* direct, LISTEN/NOTIFY (the default);
* direct, poll only (``--no-notify``, 500 ms);
* session pooling, LISTEN/NOTIFY;
* transaction pooling, as docs/workers.md configures it: ``POOLER = "transaction"``,
  poll only every 500 ms, nothing prepared.

Wake-up: one job at a time enqueued to an idle worker, commit -> handler start (median,
p95). Drain: N no-op jobs enqueued in one transaction to an idle worker with 32 slots,
until the last is completed (jobs a second). Prints one line per measurement.

    python bench/pgbouncer.py [WAKEUPS] [DRAIN_JOBS]
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DB_NAME = "boson_bench_pgbouncer"
os.environ.update(DJANGO_SETTINGS_MODULE="tests.faults.pooled_settings", BOSON_TEST_DB="postgres",
                  BOSON_PG_NAME=DB_NAME)
os.environ.pop("BOSON_TEST_POOLER", None)
POLL_MS = "500"


def create_database() -> None:
    import psycopg

    with psycopg.connect(dbname="postgres", host="127.0.0.1", user="postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def route(port: int, pooler: str | None) -> None:
    """Send this process's queries to ``port`` with ``POOLER`` set as a worker's are."""
    from django.conf import settings
    from django.db import connections

    connections.close_all()
    connections["default"].settings_dict["PORT"] = str(port)
    boson = {k: v for k, v in settings.BOSON.items() if k not in ("POOLER", "NOTIFY")}
    settings.BOSON = {**boson, "POOLER": pooler, **({"NOTIFY": False} if pooler == "transaction" else {})}


def start_worker(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "django", "boson_worker", *args]
    return subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT,
                            stdout=open(folder / "worker.log", "wb"), stderr=subprocess.STDOUT)


def wait_for(path: Path, timeout: float = 30.0) -> float:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):  # written, not just created
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear: is the worker running?")
        time.sleep(0.0005)
    return float(path.read_text())


def warm_up() -> None:
    from tests.testapp.tasks import noop

    warm = noop.enqueue()
    deadline = time.monotonic() + 60
    while noop.get_result(warm.id).status != "SUCCESSFUL":
        if time.monotonic() > deadline:
            raise TimeoutError("the worker ran no job in 60 s")
        time.sleep(0.02)


def wakeups(folder: Path, n: int) -> list[float]:
    from tests.testapp.tasks import stamp

    latencies = []
    for i in range(n):
        time.sleep(random.uniform(0.05, 0.15))  # idle again, waiting
        stamp.enqueue(str(folder), i)
        committed = time.time()
        latencies.append((wait_for(folder / f"start-{i}") - committed) * 1000)
    return latencies


def drain(n: int) -> float:
    from boson_django import services
    from boson_django.services import Envelope

    done_before = services.counts().get("completed", 0)
    started = time.monotonic()
    services.enqueue([Envelope(task="tests.testapp.tasks.noop", args=[], kwargs={}) for _ in range(n)], unique=False)
    while services.counts().get("completed", 0) < done_before + n:
        time.sleep(0.01)
    return n / (time.monotonic() - started)


def measure(label: str, port: int, pooler: str | None, n: int, jobs: int, *worker_args: str) -> None:
    env = {"BOSON_PG_PORT": str(port), "BOSON_TEST_POOLER": pooler or ""}
    route(port, pooler)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        worker = start_worker(folder, env, "--concurrency", "32", "--verbosity", "0", *worker_args)
        try:
            warm_up()
            ms = sorted(wakeups(folder, n))
            rate = drain(jobs)
        finally:
            worker.terminate()
            worker.wait(30)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"{label:<40} wake-up median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms (n={n})   "
          f"drain {rate:7.0f} jobs/s (n={jobs})", flush=True)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 5_000
    create_database()
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from boson_django import clock
    from tests.faults.pgbouncer import PgBouncer

    clock.unfreeze()
    session, transaction = PgBouncer("session", "127.0.0.1", 5432).start(), PgBouncer("transaction", "127.0.0.1", 5432).start()
    try:
        measure("direct, LISTEN/NOTIFY", 5432, None, n, jobs)
        measure(f"direct, poll only ({POLL_MS} ms)", 5432, None, n, jobs, "--no-notify", "--poll-interval-ms", POLL_MS)
        measure("PgBouncer session pooling, NOTIFY", session.port, "session", n, jobs)
        measure(f"PgBouncer transaction pooling ({POLL_MS} ms)", transaction.port, "transaction", n, jobs,
                "--poll-interval-ms", POLL_MS)
    finally:
        from django.db import connections

        connections.close_all()
        session.stop()
        transaction.stop()


if __name__ == "__main__":
    main()
