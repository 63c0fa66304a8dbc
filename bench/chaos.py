"""Seeded chaos run: N jobs, W worker processes, random SIGKILLs and connection kills.

    BOSON_TEST_DB=postgres python bench/chaos.py --seconds 60 --jobs 2000 --workers 4 --seed 1
    BOSON_TEST_DB=sqlite   python bench/chaos.py --seconds 60            # connection kills need PostgreSQL

For ``--seconds`` the loop kills a random worker (SIGKILL, then starts a replacement) or,
on PostgreSQL, terminates a random worker connection, at random intervals drawn from the
seed. Then it lets the workers drain, stops them with SIGTERM and checks: every job
completed, exactly one committed effect each, and a clean invariant check
(``tests/faults/checker.py``: ``find_problems()`` plus lost/stranded/overlap checks).
It prints the figures and exits 1 if anything is wrong. The store clock runs free here
(wall-clock chaos); ``tests/faults/test_chaos.py`` runs a short version in the suite.

Standalone it uses its own database: ``BOSON_PG_NAME`` (default ``boson_chaos``, created
if missing) or a fresh SQLite file.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "tests.testapp.fault_tasks.chaos_job"


@dataclass
class Figures:
    seed: int
    jobs: int
    workers: int
    seconds: float
    kills: int = 0
    connection_kills: int = 0
    reclaims: int = 0
    duration_s: float = 0.0
    completed: int = 0
    effects: int = 0
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"seed={self.seed} jobs={self.jobs} workers={self.workers} chaos_seconds={self.seconds:g}",
            f"sigkills={self.kills} connection_kills={self.connection_kills} reclaims={self.reclaims}",
            f"completed={self.completed} effects={self.effects} duration={self.duration_s:.1f}s",
            f"problems={len(self.problems)}" + "".join(f"\n  {p}" for p in self.problems[:20]),
        ]


def run(*, seconds: float, jobs: int, workers: int, seed: int, folder: str, drain_s: float = 180.0) -> Figures:
    """The chaos run on the configured database (Django must be set up; tables empty)."""
    from boson_django import services
    from boson_django.models import Run
    from boson_django.services import Envelope
    from tests.faults.checker import problems
    from tests.faults.support import Worker, is_postgres
    from tests.testapp.models import Effect

    rng = random.Random(seed)
    figures = Figures(seed, jobs, workers, seconds)
    services.set_task_config(TASK, crash_limit=1_000)  # kills must not quarantine: every job ends completed
    ids: list[str] = []
    for start in range(0, jobs, 500):
        batch = [Envelope(task=TASK, args=[rng.randint(0, 400), rng.random() < 0.1]) for _ in range(start, min(jobs, start + 500))]
        ids += [r.id for r in services.enqueue(batch, unique=False)]
    import pathlib

    where = pathlib.Path(folder)
    names = iter(f"chaos-{n}" for n in range(10_000))
    pool = [Worker(where, next(names), "--concurrency", "4") for _ in range(workers)]
    began = time.monotonic()
    try:
        while time.monotonic() - began < seconds:
            time.sleep(rng.uniform(0.5, 2.5))
            victim = rng.randrange(len(pool))
            if is_postgres() and rng.random() < 0.4:
                figures.connection_kills += _kill_a_connection(pool[victim].pid, rng)
            else:
                pool[victim].kill()
                figures.kills += 1
                pool[victim] = Worker(where, next(names), "--concurrency", "4")
        deadline = time.monotonic() + drain_s
        while time.monotonic() < deadline and services.counts().get("completed", 0) < jobs:
            time.sleep(0.2)
    finally:
        for worker in pool:
            worker.signal(signal.SIGTERM) if worker.popen.poll() is None else None
        for worker in pool:
            worker.exit_code(timeout=60)
    figures.duration_s = time.monotonic() - began
    figures.completed = services.counts().get("completed", 0)
    figures.reclaims = Run.objects.filter(outcome="lease_lost").count()
    figures.effects = Effect.objects.count()
    figures.problems = problems(ids)
    if figures.completed != jobs:
        figures.problems.append(f"{jobs - figures.completed} jobs did not complete: {services.counts()}")
    if figures.effects != jobs:
        figures.problems.append(f"{figures.effects} effects for {jobs} jobs")
    return figures


def _kill_a_connection(worker_pid: int, rng: random.Random) -> int:
    """Terminate one backend of the chaos database other than ours (a worker's loop or handler)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend' ORDER BY pid"
        )
        pids = [row[0] for row in cursor.fetchall()]
        if not pids:
            return 0
        cursor.execute("SELECT pg_terminate_backend(%s)", [rng.choice(pids)])
    return 1


def _setup(db: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.faults.settings"
    os.environ["BOSON_TEST_DB"] = db
    if db == "postgres":
        name = os.environ.setdefault("BOSON_PG_NAME", "boson_chaos")
        import psycopg

        with psycopg.connect(dbname="postgres", user=os.environ.get("BOSON_PG_USER", "postgres"),
                             host=os.environ.get("BOSON_PG_HOST", "127.0.0.1"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    else:
        os.environ["BOSON_SQLITE_PATH"] = os.path.join(tempfile.mkdtemp(prefix="boson-chaos-"), "chaos.sqlite3")
    sys.path.insert(0, ROOT)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    _setup(os.environ.get("BOSON_TEST_DB", "sqlite"))
    import tests.testapp.fault_tasks  # noqa: F401 -- registers the task in this process

    figures = run(seconds=args.seconds, jobs=args.jobs, workers=args.workers, seed=seed,
                  folder=tempfile.mkdtemp(prefix="boson-chaos-logs-"))
    print("\n".join(figures.lines()))
    return 1 if figures.problems else 0


if __name__ == "__main__":
    sys.exit(main())
