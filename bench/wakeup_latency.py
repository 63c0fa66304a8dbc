"""Wake-up latency: time from an enqueue's commit to its handler starting, idle worker.

Starts a real ``boson_worker`` subprocess on PostgreSQL (database ``boson_bench_wakeup``
on 127.0.0.1, created and migrated if missing), enqueues one job at a time with the
worker idle, and prints the median and p95 of commit -> handler start:

1. with LISTEN/NOTIFY (the target is a median under 50 ms);
2. with ``--no-notify`` (poll only, as behind PgBouncer): it still runs every job, with
   latency bounded by the poll interval.

    python bench/wakeup_latency.py [N]
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
DB_NAME = "boson_bench_wakeup"
os.environ.update(DJANGO_SETTINGS_MODULE="tests.settings", BOSON_TEST_DB="postgres", BOSON_PG_NAME=DB_NAME)


def create_database() -> None:
    import psycopg

    host = os.environ.get("BOSON_PG_HOST", "127.0.0.1")
    user = os.environ.get("BOSON_PG_USER", "postgres")
    with psycopg.connect(dbname="postgres", host=host, user=user, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def start_worker(folder: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "django", "boson_worker", "--concurrency", "1", "--verbosity", "0", *extra]
    return subprocess.Popen(command, env=env, cwd=ROOT, stderr=open(folder / "worker.log", "wb"))


def wait_for(path: Path, timeout: float = 10.0) -> float:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear: is the worker running?")
        time.sleep(0.0005)
    time.sleep(0.001)  # let the writer finish the file
    return float(path.read_text())


def measure(label: str, n: int, *worker_args: str) -> list[float]:
    from tests.testapp.tasks import noop, stamp

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        worker = start_worker(folder, *worker_args)
        try:
            warm = noop.enqueue()  # wait until the worker is up and has run one job
            while noop.get_result(warm.id).status != "SUCCESSFUL":
                time.sleep(0.05)
            latencies = []
            for i in range(n):
                time.sleep(random.uniform(0.05, 0.15))  # the worker is idle again, waiting
                stamp.enqueue(str(folder), i)  # autocommit: committed when enqueue returns
                committed = time.time()
                latencies.append((wait_for(folder / f"start-{i}") - committed) * 1000)
        finally:
            worker.terminate()
            worker.wait(30)
    report(label, latencies)
    return latencies


def report(label: str, ms: list[float]) -> None:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"{label:<34} n={len(ms):<4} median={statistics.median(ms):7.1f} ms   p95={p95:7.1f} ms   max={max(ms):7.1f} ms")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    create_database()
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from boson_django import clock

    clock.unfreeze()
    notify = measure("LISTEN/NOTIFY", n)
    measure("poll only (--no-notify, 1000 ms)", max(n // 5, 10), "--no-notify", "--poll-interval-ms", "1000")
    target = "met" if statistics.median(notify) < 50 else "MISSED"
    print(f"target median < 50 ms with NOTIFY: {target}")


if __name__ == "__main__":
    main()
