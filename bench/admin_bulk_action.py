"""How long one "all matching" bulk action takes in the admin (PostgreSQL).

Fills database ``boson_bench_bulk`` (dropped and created afresh; ``BOSON_PG_NAME`` names
another) with N failed jobs by one INSERT ... SELECT generate_series, then submits the
confirmed "retry all matching" action of the failed-jobs changelist through Django's test
client as a superuser, and prints the time and the message. ``BOSON_BENCH_JOBS`` changes
N (default 10,000); ``--action cancel`` fills available jobs and cancels them instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ["BOSON_TEST_DB"] = "postgres"
os.environ.setdefault("BOSON_PG_NAME", "boson_bench_bulk")
N = int(os.environ.get("BOSON_BENCH_JOBS", "10000"))

FILL = """
INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight,
  max_attempts, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at,
  finalized_at, expires_at)
SELECT lpad(g::text, 12, '0'), 'tests.testapp.tasks.noop', 'q' || (g %% 5), %s,
  0, '[1, 2]', '{}', '{}', md5(g::text), 1, 1, 1, 0, 1, 0, 'ValueError: boom',
  now() - interval '1 hour', now() - interval '1 hour',
  CASE WHEN %s = 'failed' THEN now() - interval '1 hour' END,
  CASE WHEN %s = 'failed' THEN now() + interval '1 day' END
FROM generate_series(1, %s) g
"""


def _fresh_database() -> None:
    import psycopg

    name = os.environ["BOSON_PG_NAME"]
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--action", choices=["retry", "cancel"], default="retry")
    action = parser.parse_args().action
    state = "failed" if action == "retry" else "available"
    _fresh_database()
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from django.contrib.messages import get_messages
    from django.test import Client

    from boson_django import clock

    with connection.cursor() as c:
        c.execute(FILL, [state, state, state, N])
        c.execute("ANALYZE boson_job")
    client = Client()
    client.force_login(User.objects.create_superuser("bench", password="x"))
    data = {"action": f"{action}_selected", "index": 0, "select_across": 1, "_selected_action": ["000000000001"],
            "snapshot": clock.now().isoformat(), "boson_confirm": "yes"}
    start = time.perf_counter()
    response = client.post(f"/admin/boson_django/job/?state={state}", data, follow=True)
    took = time.perf_counter() - start
    said = [str(m) for m in get_messages(response.wsgi_request)]
    print(f"{action} all matching, {N:,} {state} jobs: {took:.2f} s  {said}")


if __name__ == "__main__":
    main()
