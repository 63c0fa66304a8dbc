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
import time

from _admin_db import superuser_client, use_postgres

use_postgres("boson_bench_bulk")
N = int(os.environ.get("BOSON_BENCH_JOBS", "10000"))

FILL = """
INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight,
  max_attempts, lease_ms, crash_limit, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at,
  finalized_at, expires_at)
SELECT lpad(g::text, 12, '0'), 'tests.testapp.tasks.noop', 'q' || (g %% 5), %s,
  0, '[1, 2]', '{}', '{}', md5(g::text), 1, 1, 30000, 3, 1, 0, 1, 0, 'ValueError: boom',
  now() - interval '1 hour', now() - interval '1 hour',
  CASE WHEN %s = 'failed' THEN now() - interval '1 hour' END,
  CASE WHEN %s = 'failed' THEN now() + interval '1 day' END
FROM generate_series(1, %s) g
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--action", choices=["retry", "cancel"], default="retry")
    action = parser.parse_args().action
    state = "failed" if action == "retry" else "available"
    client = superuser_client(fresh=True)
    from django.contrib.messages import get_messages
    from django.db import connection

    from boson_django import clock

    with connection.cursor() as c:
        c.execute(FILL, [state, state, state, N])
        c.execute("ANALYZE boson_job")
    data = {"action": f"{action}_selected", "index": 0, "select_across": 1, "_selected_action": ["000000000001"],
            "snapshot": clock.now().isoformat(), "boson_confirm": "yes"}
    start = time.perf_counter()
    response = client.post(f"/admin/boson_django/job/?state={state}", data, follow=True)
    took = time.perf_counter() - start
    said = [str(m) for m in get_messages(response.wsgi_request)]
    print(f"{action} all matching, {N:,} {state} jobs: {took:.2f} s  {said}")


if __name__ == "__main__":
    main()
