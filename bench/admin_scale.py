"""Response times of the admin's lists, searches and dashboard with 1,000,000 jobs.

    python bench/admin_scale.py                 # PostgreSQL, database boson_bench_admin
    python bench/admin_scale.py --db sqlite     # SQLite, file /tmp/boson_bench_admin.sqlite3

Fills the database (created if missing; ``BOSON_PG_NAME`` or ``BOSON_SQLITE_PATH`` names
another) with N jobs and a run of each, by one INSERT ... SELECT each: mostly completed,
some failed, available, running and quarantined, over 5 queues and 26 tasks -- 24 sharing
the jobs evenly, ``shop.legacy.tasks.import_catalog`` holding the 5% oldest (the worst
case for a list newest first: its jobs are the last a walk down the ids meets) and
``shop.audit.tasks.rare_check`` ten -- a unique key on every tenth job, then vacuums
and analyzes the tables (as autovacuum keeps a live table: without it PostgreSQL's
index-only counts read the heap, and the dashboard took 300 ms, not 35). Then times each page
through Django's test client as a superuser (best of three, after one to warm the
caches) and prints the time and the number of queries. ``BOSON_BENCH_JOBS`` changes N.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _admin_db import superuser_client, use_postgres, use_sqlite

N = int(os.environ.get("BOSON_BENCH_JOBS", "1000000"))
MODULES = ("mail", "billing", "search", "media", "reports", "crm")
FUNCTIONS = ("send_receipt", "sync_account", "rebuild_index", "export_csv")

#: Per vendor: the numbers 1..N as rows of ``g``, a job id, a time ``g`` ms before now.
VENDOR = {
    "postgres": {
        "series": "generate_series(1, %s) s(g)",
        "id": "lpad(g::text, 12, '0')",
        "ago": "now() - (g || ' ms')::interval",
        "now": "now()",
        "soon": "now() + interval '20 s'",
        "fingerprint": "md5(g::text)",
        "analyze": "VACUUM ANALYZE boson_job; VACUUM ANALYZE boson_run",
    },
    "sqlite": {
        "series": "(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %s) SELECT g FROM s)",
        "id": "substr('000000000000' || g, -12, 12)",
        "ago": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-' || (g / 1000.0) || ' seconds')",
        "now": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')",
        "soon": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '+20 seconds')",
        "fingerprint": "printf('%%032d', g)",
        "analyze": "ANALYZE",
    },
}


def _pick(names: tuple[str, ...], expr: str) -> str:
    return "CASE " + expr + " " + " ".join(f"WHEN {i} THEN '{n}'" for i, n in enumerate(names)) + " END"


def fill_jobs(v: dict[str, str]) -> str:
    task = (f"CASE WHEN g <= %s THEN 'shop.legacy.tasks.import_catalog' WHEN g %% 100000 = 7 THEN 'shop.audit.tasks.rare_check' "
            f"ELSE 'shop.' || {_pick(MODULES, 'g %% 6')} || '.tasks.' || {_pick(FUNCTIONS, '(g / 6) %% 4')} END")
    return f"""
INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, unique_key, fingerprint, weight,
  max_attempts, lease_ms, crash_limit, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at,
  finalized_at, lease_holder, lease_expires_at)
SELECT {v['id']}, {task}, 'q' || (g %% 5),
  CASE WHEN g %% 100 < 90 THEN 'completed' WHEN g %% 100 < 95 THEN 'failed' WHEN g %% 100 < 99 THEN 'available'
       WHEN g %% 1000 < 995 THEN 'running' ELSE 'quarantined' END,
  0, '[1, 2]', '{{}}', '{{}}', CASE WHEN g %% 10 = 0 THEN 'order:' || g END, {v['fingerprint']}, 1, 3, 30000, 3, 1, 0, 1, 0,
  CASE WHEN g %% 100 BETWEEN 90 AND 94 THEN 'ValueError: boom' ELSE '' END,
  {v['ago']}, {v['ago']},
  CASE WHEN g %% 100 < 95 THEN {v['now']} END,
  CASE WHEN g %% 100 = 99 THEN 'web-' || (g %% 8) || ':' || (4000 + g %% 50) END, CASE WHEN g %% 100 = 99 THEN {v['soon']} END
FROM {v['series']}
"""


FILL_RUNS = """
INSERT INTO boson_run (job_id, task, queue, attempt, fence, worker_id, started_at, finished_at, outcome, error, logs, recorded)
SELECT id, task, queue, 1, 1, COALESCE(lease_holder, 'web-1:4001'), run_at, finalized_at,
  CASE state WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'retry' ELSE '' END, last_error, '[]', state = 'failed'
FROM boson_job WHERE state IN ('completed', 'failed', 'running')
"""

PAGES = [
    "/admin/boson_django/job/", "/admin/boson_django/job/?state=failed", "/admin/boson_django/job/?queue=q3&state=available",
    "/admin/boson_django/job/?state=quarantined", "/admin/boson_django/failedjob/", "/admin/boson_django/lease/",
    "/admin/boson_django/job/?p=50", "/admin/boson_django/dashboard/", "/admin/boson_django/dashboard/live/",
    # searches
    "/admin/boson_django/job/?q=send_receipt", "/admin/boson_django/job/?q=task:billing",
    "/admin/boson_django/job/?q=import_catalog", "/admin/boson_django/job/?q=rare_check",
    "/admin/boson_django/job/?q=queue:q3", "/admin/boson_django/job/?q=order:500000",
    "/admin/boson_django/job/?q=00000012345", "/admin/boson_django/job/?q=worker:web-3",
    "/admin/boson_django/job/?q=nothing_matches_this", "/admin/boson_django/job/?q=mail+queue:q2&state=failed",
    "/admin/boson_django/failedjob/?q=sync_account", "/admin/boson_django/quarantinedjob/?q=media",
    "/admin/boson_django/run/", "/admin/boson_django/run/?q=export_csv", "/admin/boson_django/run/?q=00000012345",
    "/admin/boson_django/run/?q=import_catalog",
]


def fill(vendor: str) -> None:
    from django.db import connection

    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM boson_job")
        if c.fetchone()[0] == N:
            return
        print(f"filling {N:,} jobs and their runs ...", flush=True)
        for table in ("boson_job", "boson_run", "boson_queue"):
            c.execute(f"DELETE FROM {table}")
        c.execute(fill_jobs(VENDOR[vendor]), [N // 20, N])
        c.execute(FILL_RUNS)
        c.execute("INSERT INTO boson_queue (name, paused) VALUES ('q0', false), ('q1', false), ('q2', false), ('q3', false), ('q4', false)")
        for statement in VENDOR[vendor]["analyze"].split("; "):
            c.execute(statement)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("pages", nargs="*", help="only these URLs (default: every page listed)")
    args = parser.parse_args()
    if args.db == "postgres":
        use_postgres("boson_bench_admin")
    else:
        use_sqlite("/tmp/boson_bench_admin.sqlite3")
    client = superuser_client(fresh=False)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fill(args.db)
    print(f"{args.db}, {N:,} jobs", flush=True)
    for url in args.pages or PAGES:
        client.get(url)  # warm caches
        best = float("inf")
        for _ in range(3):
            with CaptureQueriesContext(connection) as queries:
                start = time.perf_counter()
                response = client.get(url)
                best = min(best, time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
        found = response.context["cl"].result_count if response.context and "cl" in response.context else ""
        print(f"{url:62s} {best * 1000:7.1f} ms  {len(queries):2d} queries  {found}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
