"""Response times of the job changelist and the dashboard with 1,000,000 jobs (PostgreSQL).

Fills database ``boson_bench_admin`` (created if missing) with N jobs by one INSERT ...
SELECT generate_series (mostly completed, some failed, available, running, quarantined,
over 5 queues), then times admin pages through Django's test client as a superuser and
prints the time and the number of queries of each. ``BOSON_BENCH_JOBS`` changes N.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ["BOSON_TEST_DB"] = "postgres"
os.environ.setdefault("BOSON_PG_NAME", "boson_bench_admin")
N = int(os.environ.get("BOSON_BENCH_JOBS", "1000000"))

FILL = """
INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight,
  max_attempts, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at,
  finalized_at, lease_holder, lease_expires_at)
SELECT lpad(g::text, 12, '0'), 'tests.testapp.tasks.noop', 'q' || (g %% 5),
  CASE WHEN g %% 100 < 90 THEN 'completed' WHEN g %% 100 < 95 THEN 'failed' WHEN g %% 100 < 99 THEN 'available'
       WHEN g %% 1000 < 995 THEN 'running' ELSE 'quarantined' END,
  0, '[1, 2]', '{}', '{}', md5(g::text), 1, 3, 1, 0, 1, 0,
  CASE WHEN g %% 100 BETWEEN 90 AND 94 THEN 'ValueError: boom' ELSE '' END,
  now() - (g || ' ms')::interval, now() - (g || ' ms')::interval,
  CASE WHEN g %% 100 < 95 THEN now() END,
  CASE WHEN g %% 100 = 99 THEN 'w1' END, CASE WHEN g %% 100 = 99 THEN now() + interval '20 s' END
FROM generate_series(1, %s) g
"""


def _ensure_database() -> None:
    import psycopg

    name = os.environ["BOSON_PG_NAME"]
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            c.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    _ensure_database()
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    django.setup()
    setup_test_environment()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from django.test import Client

    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM boson_job")
        if c.fetchone()[0] != N:
            print(f"filling {N:,} jobs ...", flush=True)
            c.execute("TRUNCATE boson_job, boson_run, boson_queue")
            c.execute(FILL, [N])
            c.execute("INSERT INTO boson_queue (name, paused) SELECT 'q' || g, false FROM generate_series(0, 4) g")
            c.execute("ANALYZE boson_job")
    user = User.objects.filter(username="bench").first() or User.objects.create_superuser("bench", password="x")
    client = Client()
    client.force_login(user)
    pages = [
        "/admin/boson_django/job/", "/admin/boson_django/job/?state=failed", "/admin/boson_django/job/?queue=q3&state=available",
        "/admin/boson_django/job/?state=quarantined", "/admin/boson_django/failedjob/", "/admin/boson_django/lease/",
        "/admin/boson_django/job/?p=50", "/admin/boson_django/dashboard/",
    ]
    for url in pages:
        client.get(url)  # warm caches
        best = float("inf")
        for _ in range(3):
            with CaptureQueriesContext(connection) as queries:
                start = time.perf_counter()
                response = client.get(url)
                best = min(best, time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
        print(f"{url:55s} {best * 1000:7.1f} ms  {len(queries):2d} queries")


if __name__ == "__main__":
    main()
