"""Measure what a separate lease table would cost against leases kept on the job row.

Runs N claim+ack cycles through the real services (leases on the job row), then the same
number of the statements a separate lease table would add (batch insert at claim, delete at
ack) on a scratch table, and prints both. PostgreSQL: ``python bench/lease_layout.py``
(database ``boson_bench`` on 127.0.0.1, created if missing).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("BOSON_TEST_DB", "postgres")
os.environ.setdefault("BOSON_PG_NAME", "boson_bench")

N, BATCH = 5000, 50


def main() -> None:
    import django
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    call_command("migrate", verbosity=0)
    from boson_django import services
    from boson_django.services import Envelope, Outcome

    with connection.cursor() as c:
        c.execute("TRUNCATE boson_job, boson_run")
        c.execute("DROP TABLE IF EXISTS bench_lease")
        c.execute("CREATE TABLE bench_lease (job_id varchar(64) PRIMARY KEY, fence bigint, holder text, expires_at timestamptz)")
    services.enqueue([Envelope(task="tests.testapp.tasks.noop", queue="bench") for _ in range(N)])

    start = time.perf_counter()
    done = 0
    while done < N:
        units = services.admit("bench", ["bench"], BATCH)
        for unit in units:
            services.ack(unit.lease, Outcome.SUCCESS)
        done += len(units)
    on_row = time.perf_counter() - start

    start = time.perf_counter()
    with connection.cursor() as c:
        for base in range(0, N, BATCH):
            ids = [f"j{base + i}" for i in range(BATCH)]
            c.execute(
                "INSERT INTO bench_lease VALUES " + ", ".join(["(%s, 1, 'w', now())"] * len(ids)), ids
            )
            for job_id in ids:
                c.execute("DELETE FROM bench_lease WHERE job_id = %s", [job_id])
    extra = time.perf_counter() - start
    print(f"claim+ack, lease on job row: {N / on_row:,.0f} jobs/s ({on_row * 1e6 / N:.0f} us/job)")
    print(f"extra statements of a lease table: +{extra * 1e6 / N:.0f} us/job "
          f"(+{100 * extra / on_row:.0f}% on the claim+ack path)")


if __name__ == "__main__":
    main()
