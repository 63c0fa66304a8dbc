"""The cost of migration 0007 (job lease lengths and crash limits made NOT NULL) on a
store holding N jobs, on PostgreSQL and on SQLite:

    python bench/migration_0007.py [--rows 1000000] [--db postgres sqlite]

Each database in a process of its own: a fresh store (PostgreSQL database
``t_migration_bench``, or an SQLite file in a temporary directory) migrated to 0006,
filled with N job rows by one INSERT ... SELECT (one row in 1,000 without a lease length,
one in 1,000 without a crash limit, over 10 tasks, 3 of them with a TaskConfig row), then
``migrate boson_django 0007`` timed: in all, and each SQL statement it runs (the slowest
shown). On PostgreSQL the migration holds ACCESS EXCLUSIVE on ``boson_job`` from its first
``ALTER TABLE`` to its commit: printed as ``lock``. Then the rows' (task, lease_ms,
crash_limit) counts, as a digest to compare two versions of the migration by. The
database (or file) is dropped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_NAME = "t_migration_bench"

#: Job columns filled; ``{lease}`` and ``{crash}`` are the two policy columns' expressions of g.
FILL = """
INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight,
  max_attempts, lease_ms, crash_limit, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at)
SELECT 'j' || g, 'tests.testapp.tasks.t' || (g % 10), 'q' || (g % 5),
  CASE WHEN g % 100 < 90 THEN 'completed' ELSE 'available' END,
  0, '[1, 2]', '{{}}', '{{}}', 'fp' || g, 1, 3,
  CASE WHEN g % 1000 = 7 THEN NULL ELSE 30000 END, CASE WHEN g % 1000 = 3 OR g % 2000 = 7 THEN NULL ELSE 3 END,
  0, 0, 0, 0, '', {now}, {now}
FROM {series}
"""
SERIES = {
    "postgresql": "generate_series(1, %s) g",
    "sqlite": "(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %s) SELECT g FROM s)",
}
NOW = {"postgresql": "now()", "sqlite": "'2030-01-01 00:00:00'"}
CONFIGS = [  # (task, lease_ms, crash_limit): one with both, one with a lease length only, one with neither
    ("tests.testapp.tasks.t1", 5000, 2),
    ("tests.testapp.tasks.t7", 60000, None),
    ("tests.testapp.tasks.t3", None, None),
]


def settings(db: str, sqlite_path: str) -> None:
    from django.conf import settings as django_settings

    if db == "postgres":
        database = {"ENGINE": "django.db.backends.postgresql", "NAME": PG_NAME, "USER": "postgres",
                    "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"), "PORT": os.environ.get("BENCH_PG_PORT", "5432")}
    else:
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": sqlite_path}
    apps = ["django.contrib.contenttypes", "django.contrib.auth", "boson_django"]
    try:
        import django.tasks  # noqa: F401
    except ImportError:
        apps.insert(0, "django_tasks")
    django_settings.configure(
        SECRET_KEY="bench-only", USE_TZ=True, INSTALLED_APPS=apps, DATABASES={"default": database},
        TASKS={"default": {"BACKEND": "boson_django.backend.BosonBackend"}}, BOSON={},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )


def measure(db: str, rows: int) -> dict:
    """One database: set up, fill, migrate, read back; the numbers as a dict."""
    sys.path.insert(0, str(ROOT))
    workdir = tempfile.mkdtemp(prefix="t_migration_")
    sqlite_path = os.path.join(workdir, "t_migration.sqlite3")
    if db == "postgres":
        import psycopg

        with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
            c.execute(f'CREATE DATABASE "{PG_NAME}"')
    try:
        settings(db, sqlite_path)
        import django
        from django.core.management import call_command
        from django.db import connection

        django.setup()
        call_command("migrate", "boson_django", "0006", verbosity=0)
        vendor = connection.vendor
        start = time.perf_counter()
        with connection.cursor() as c:
            c.execute(FILL.format(now=NOW[vendor], series=SERIES[vendor] % int(rows)))
            c.executemany("INSERT INTO boson_task_config (task, lease_ms, crash_limit) VALUES (%s, %s, %s)", CONFIGS)
            c.execute("ANALYZE" if vendor == "sqlite" else "ANALYZE boson_job")
            c.execute("SELECT count(*), count(lease_ms), count(crash_limit) FROM boson_job")
            total, leased, limited = c.fetchone()
            if vendor == "postgresql":
                c.execute("SELECT pg_total_relation_size('boson_job')")
                size = c.fetchone()[0]
            else:
                size = os.path.getsize(sqlite_path)
        filled = time.perf_counter() - start

        statements: list[tuple[float, float, str]] = []

        def timed(execute, sql, params, many, context):
            began = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                statements.append((began, time.perf_counter() - began, " ".join(str(sql).split())))

        with connection.execute_wrapper(timed):
            start = time.perf_counter()
            call_command("migrate", "boson_django", "0007", verbosity=0)
            end = time.perf_counter()
        alters = [began for began, _, sql in statements if sql.upper().startswith("ALTER TABLE")]
        with connection.cursor() as c:
            c.execute("SELECT task, lease_ms, crash_limit, count(*) FROM boson_job GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
            groups = c.fetchall()
        slowest = sorted(statements, key=lambda s: -s[1])[:6]
        return {
            "db": vendor, "rows": total, "null_lease_ms": total - leased, "null_crash_limit": total - limited,
            "mb": round(size / 2**20), "fill_s": round(filled, 2), "migrate_s": round(end - start, 3),
            "lock_s": round(end - alters[0], 3) if alters and vendor == "postgresql" else None,
            "statements": len(statements),
            "slowest": [(round(seconds, 3), sql[:110]) for _, seconds, sql in slowest],
            "groups": len(groups), "digest": hashlib.sha256(repr(groups).encode()).hexdigest()[:16],
        }
    finally:
        from django.db import connections

        connections.close_all()
        if db == "postgres":
            import psycopg

            with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
        for name in os.listdir(workdir):
            os.remove(os.path.join(workdir, name))
        os.rmdir(workdir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", nargs="+", default=["postgres", "sqlite"], choices=["postgres", "sqlite"])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.rows)))
        return
    for db in args.db:
        out = subprocess.run([sys.executable, __file__, "--one", db, "--rows", str(args.rows)],
                             check=True, capture_output=True, text=True, cwd=ROOT).stdout
        result = json.loads(out.splitlines()[-1])
        print(f"{result['db']}: {result['rows']:,} jobs ({result['null_lease_ms']:,} without lease_ms, "
              f"{result['null_crash_limit']:,} without crash_limit; {result['mb']} MB with indexes"
              f"{' (the whole file)' if result['db'] == 'sqlite' else ''}), filled in {result['fill_s']} s")
        lock = f", ACCESS EXCLUSIVE held {result['lock_s']} s" if result["lock_s"] is not None else ""
        print(f"  migrate boson_django 0007: {result['migrate_s']} s{lock}, {result['statements']} statements")
        for seconds, sql in result["slowest"]:
            print(f"    {seconds:8.3f} s  {sql}")
        print(f"  result: {result['groups']} (task, lease_ms, crash_limit) groups, digest {result['digest']}")


if __name__ == "__main__":
    main()
