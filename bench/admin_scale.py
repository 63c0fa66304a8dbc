"""Response times of the job changelist and the dashboard with 1,000,000 jobs (PostgreSQL).

Fills database ``boson_bench_admin`` (created if missing) with N jobs by one INSERT ...
SELECT generate_series (mostly completed, some failed, available, running, quarantined,
over 5 queues), then times admin pages through Django's test client as a superuser and
prints the time and the number of queries of each. ``BOSON_BENCH_JOBS`` changes N.
"""

from __future__ import annotations

import os
import time

from _admin_db import superuser_client, use_postgres

use_postgres("boson_bench_admin")
N = int(os.environ.get("BOSON_BENCH_JOBS", "1000000"))

FILL = """
INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight,
  max_attempts, lease_ms, crash_limit, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at,
  finalized_at, lease_holder, lease_expires_at)
SELECT lpad(g::text, 12, '0'), 'tests.testapp.tasks.noop', 'q' || (g %% 5),
  CASE WHEN g %% 100 < 90 THEN 'completed' WHEN g %% 100 < 95 THEN 'failed' WHEN g %% 100 < 99 THEN 'available'
       WHEN g %% 1000 < 995 THEN 'running' ELSE 'quarantined' END,
  0, '[1, 2]', '{}', '{}', md5(g::text), 1, 3, 30000, 3, 1, 0, 1, 0,
  CASE WHEN g %% 100 BETWEEN 90 AND 94 THEN 'ValueError: boom' ELSE '' END,
  now() - (g || ' ms')::interval, now() - (g || ' ms')::interval,
  CASE WHEN g %% 100 < 95 THEN now() END,
  CASE WHEN g %% 100 = 99 THEN 'w1' END, CASE WHEN g %% 100 = 99 THEN now() + interval '20 s' END
FROM generate_series(1, %s) g
"""


def main() -> None:
    client = superuser_client(fresh=False)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM boson_job")
        if c.fetchone()[0] != N:
            print(f"filling {N:,} jobs ...", flush=True)
            c.execute("TRUNCATE boson_job, boson_run, boson_queue")
            c.execute(FILL, [N])
            c.execute("INSERT INTO boson_queue (name, paused) SELECT 'q' || g, false FROM generate_series(0, 4) g")
            c.execute("ANALYZE boson_job")
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
