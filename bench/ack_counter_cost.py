"""What the throughput counter costs on the ack path, in microseconds per ack.

Runs N admit+ack cycles through the real services twice: with the counter upsert
(``services.throughput.Tally.write``) as shipped, and with it replaced by a no-op, and
prints us/ack for each and the difference. PostgreSQL by default (database
``boson_bench`` on 127.0.0.1, created if missing); ``BOSON_TEST_DB=sqlite`` for SQLite.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("BOSON_TEST_DB", "postgres")
os.environ.setdefault("BOSON_PG_NAME", "boson_bench")
os.environ.setdefault("BOSON_SQLITE_PATH", "/tmp/boson_bench.sqlite3")

N, BATCH, ROUNDS = 2000, 50, 3


def _ensure_pg_database() -> None:
    if os.environ["BOSON_TEST_DB"] != "postgres":
        return
    import psycopg

    name = os.environ["BOSON_PG_NAME"]
    with psycopg.connect(host=os.environ.get("BOSON_PG_HOST", "127.0.0.1"), user="postgres", dbname="postgres", autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            c.execute(f'CREATE DATABASE "{name}"')


def _cycle(services, Envelope, Outcome) -> float:
    """Seconds spent inside ack() for N jobs (admission excluded)."""
    services.enqueue([Envelope(task="tests.testapp.tasks.noop", queue="bench") for _ in range(N)])
    spent = 0.0
    while True:
        units = services.admit("bench-worker", ["bench"], BATCH)
        if not units:
            return spent
        for unit in units:
            start = time.perf_counter()
            services.ack(unit.lease, Outcome.SUCCESS)
            spent += time.perf_counter() - start


def main() -> None:
    _ensure_pg_database()
    import django
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    call_command("migrate", verbosity=0)
    from boson_django import services
    from boson_django.services import Envelope, Outcome, throughput

    real = throughput.Tally.write
    results: dict[str, list[float]] = {"with counter": [], "without counter": []}
    for _ in range(ROUNDS):
        for name, fn in (("without counter", lambda self, now, using: None), ("with counter", real)):
            with connection.cursor() as c:
                c.execute("DELETE FROM boson_run")
                c.execute("DELETE FROM boson_job")
                c.execute("DELETE FROM boson_throughput_minute")
            throughput.Tally.write = fn  # type: ignore[method-assign]
            results[name].append(_cycle(services, Envelope, Outcome) / N * 1e6)
    throughput.Tally.write = real  # type: ignore[method-assign]
    print(f"{connection.vendor}: {N} acks x {ROUNDS} rounds (best round)")
    for name, values in results.items():
        print(f"  {name:16s} {min(values):8.1f} us/ack")
    print(f"  {'counter cost':16s} {min(results['with counter']) - min(results['without counter']):8.1f} us/ack")


if __name__ == "__main__":
    main()
