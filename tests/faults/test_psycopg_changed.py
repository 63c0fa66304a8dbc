"""A worker whose psycopg no longer has what the hot statements' fast path on libpq
uses (``services._libpq``) keeps draining jobs through psycopg's cursor, after one
warning, instead of ending its loop. A real worker process on PostgreSQL."""

from __future__ import annotations

import subprocess
import sys

import pytest

from boson_django import services
from tests.faults.support import ROOT, enqueue_many, fault_env

pytestmark = pytest.mark.postgres

#: Starts ``boson_worker`` on psycopg's pure-Python libpq wrapper without the blocking
#: ``PGconn.exec_prepared`` the fast path calls (psycopg itself never calls it: it sends
#: and waits without blocking), as a later psycopg might ship it.
CHANGED_PSYCOPG = """
import sys
import psycopg.pq

assert psycopg.pq.__impl__ == "python", psycopg.pq.__impl__
del psycopg.pq.PGconn.exec_prepared
from django.core.management import execute_from_command_line
execute_from_command_line(["boson_worker", *sys.argv[1:]])
"""


def test_a_worker_on_a_changed_psycopg_drains_every_job_after_one_warning(live_clock, tmp_path):
    jobs = enqueue_many("tests.testapp.tasks.add", 40, args=[2, 3])
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.run(
            [sys.executable, "-c", CHANGED_PSYCOPG, "boson_worker", "--burst", "--concurrency", "4",
             "--no-notify", "--poll-interval-ms", "50"],
            env=fault_env(PSYCOPG_IMPL="python"), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=120,
        )
    text = log.read_text()
    assert worker.returncode == 0, text
    assert services.counts().get("completed") == 40, (services.counts(), text)
    assert all(services.get_result(job_id).data == 5 for job_id in jobs)
    assert text.count("fast path on libpq does not work") == 1, text
    assert "Traceback" not in text, text
