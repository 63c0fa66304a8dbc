"""The benchmark's boson driver runs end to end at a tiny size, so bench/ cannot rot.

No timing assertions: only that every measurement produced a positive number. The peers
(own virtualenvs installed from the package registry) run with ``python bench/run.py --quick``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests import databases

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "bench" / "systems" / "boson.py"


def _run(*args: str, **env: str) -> dict:
    proc = subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, timeout=300,
                          cwd=str(ROOT / "bench"), env={**os.environ, "DJANGO_SETTINGS_MODULE": "bench_settings", **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-RESULT ")][-1]
    return json.loads(line.split(" ", 1)[1])


@pytest.fixture(scope="module")
def pg_env():
    """The driver's settings for this suite's PostgreSQL server, in a database of its own
    (the driver makes it afresh each time), dropped once the module's tests are done."""
    pg = settings.DATABASES["default"]
    name = databases.name("bench")
    try:
        yield {"BENCH_BOSON_DB": name, "BENCH_PG_HOST": pg["HOST"], "BENCH_PG_USER": pg["USER"], "BENCH_PG_PORT": str(pg["PORT"])}
    finally:
        databases.drop(name)


def test_sqlite_drain_measures_something(tmp_path):
    result = _run("sqlite", "--n", "60", "--reps", "1", "--window", "2", "--concurrency", "4")
    assert result["drain"][0] > 0


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_measurements_run(pg_env):
    result = _run("peers", "--n", "60", "--single", "5", "--reps", "1", "--wakeups", "2", "--window", "2",
                  "--concurrency", "4", **pg_env)
    assert result["bulk"][0] > 0 and result["single"][0] > 0 and result["drain"][0] > 0
    assert result["wakeup"]["p50_ms"] > 0


@pytest.mark.slow
@pytest.mark.postgres
def test_the_scale_drain_starts_every_process_before_the_jobs(pg_env):
    result = _run("drain", "--started", "--processes", "2", "--n", "16000", "--reps", "1", "--window", "20",
                  "--concurrency", "4", **pg_env)
    (drain,) = result["drain"]
    assert drain["jobs_per_s"] > 0 and drain["measured_jobs"] > 0
    # where the machine's CPU went in the middle of it: the database's processes and the
    # workers' both found, the shares adding up to no more than the machine (16,000 jobs:
    # with 4,000 the middle of the drain was ~0.5 s, 109 clock ticks, and a tick or two of
    # rounding per process read summed to 1.11 once in CI)
    cpu = drain["cpu"]
    assert cpu["jobs"] > 0 and cpu["cores_busy"] > 0 and cpu["us_per_job"] > 0
    assert cpu["database"] > 0 and cpu["workers"] > 0
    assert cpu["database"] + cpu["workers"] + cpu["idle"] <= 1.05


@pytest.mark.slow
@pytest.mark.postgres
def test_the_long_drain_measures_both_fifths(pg_env):
    # big enough that the drain outlasts the driver's 0.1 s polls (500 jobs at concurrency 8
    # sometimes all finished before its first look, and measured 0 s)
    result = _run("long", "--long", "3000", "--reps", "1", "--concurrency", "4", **pg_env)
    (long,) = result["long_drain"]
    assert long["first_fifth"] > 0 and long["last_fifth"] > 0 and long["seconds"] > 0
