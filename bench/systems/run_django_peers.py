"""django-q2 (ORM broker) and django-tasks-db in the benchmark, each in its own venv:

    python bench/systems/run_django_peers.py peers --system djangoq|tasksdb

Neither has a bulk enqueue API: "bulk" is one enqueue call per job inside one
``transaction.atomic``. One-at-a-time is one call per job in autocommit. Drain: one worker
process (django-q2 ``qcluster`` with ``workers=1``, the ORM broker, poll 0.2 s;
django-tasks-db ``db_worker --batch``). Neither wakes on NOTIFY: wake-up is polling.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
import common  # noqa: E402

DBS = {"djangoq": "bench_djangoq", "tasksdb": "bench_tasksdb"}


def configure(system: str) -> None:
    from django.conf import settings

    apps = ["django.contrib.contenttypes", "django.contrib.auth"]
    extra: dict = {}
    if system == "djangoq":
        apps.append("django_q")
        extra["Q_CLUSTER"] = {"name": "bench", "orm": "default", "workers": 1, "poll": 0.2,
                              "timeout": 60, "retry": 120, "save_limit": 0, "log_level": "WARNING"}
    else:
        apps.append("django_tasks_db")
        extra["TASKS"] = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    settings.configure(
        INSTALLED_APPS=apps, USE_TZ=True, SECRET_KEY="bench", DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": DBS[system], **_pg()}},
        LOGGING_CONFIG=None, **extra,
    )
    import django

    django.setup()


def _pg() -> dict:
    return {"HOST": common.PG["host"], "PORT": str(common.PG["port"]), "USER": common.PG["user"]}


class Peer:
    def __init__(self, system: str):
        self.system = system
        self.db = DBS[system]

    def enqueue_noop(self) -> None:
        if self.system == "djangoq":
            from django_q.tasks import async_task

            async_task("dq_tasks.noop")
        else:
            from dtdb_tasks import noop

            noop.enqueue()

    def enqueue_stamp(self, path: str, tag: str) -> None:
        if self.system == "djangoq":
            from django_q.tasks import async_task

            async_task("dq_tasks.stamp", path, tag)
        else:
            from dtdb_tasks import stamp

            stamp.enqueue(path, tag)

    def clear(self) -> None:
        from django.db import connection

        with connection.cursor() as c:
            tables = ["django_q_ormq", "django_q_task"] if self.system == "djangoq" else ["django_tasks_database_dbtaskresult"]
            c.execute(f"TRUNCATE {', '.join(tables)}")

    def done_sql(self) -> str:
        if self.system == "djangoq":
            return "SELECT COUNT(*) FROM django_q_task WHERE success"
        return "SELECT COUNT(*) FROM django_tasks_database_dbtaskresult WHERE status = 'SUCCESSFUL'"

    def worker_cmd(self, draining: bool) -> list[str]:
        return [sys.executable, __file__, "worker", "--system", self.system] + (["--drain"] if draining else [])


def bulk(peer: Peer, n: int) -> float:
    from django.db import transaction

    peer.clear()

    def go() -> None:
        with transaction.atomic():
            for _ in range(n):
                peer.enqueue_noop()

    return n / common.timed(go)


def single(peer: Peer, n: int) -> float:
    peer.clear()
    return n / common.timed(lambda: [peer.enqueue_noop() for _ in range(n)])


def spawn(peer: Peer, draining: bool) -> subprocess.Popen:
    return subprocess.Popen(peer.worker_cmd(draining), stdout=subprocess.DEVNULL,
                            stderr=open(f"/tmp/bench-{peer.system}-worker.log", "ab"), start_new_session=False)


def drain(peer: Peer, n: int, window: float) -> float:
    from django.db import transaction

    peer.clear()
    with transaction.atomic():
        for _ in range(n):
            peer.enqueue_noop()
    return common.drain_rate(lambda: [spawn(peer, True)], lambda: common.scalar(peer.db, peer.done_sql()), n,
                             window_s=window)["jobs_per_s"]


def wakeup(peer: Peer, n: int) -> dict:
    peer.clear()
    stamps = common.Stamps()
    proc = spawn(peer, False)
    try:
        time.sleep(3.0)
        return common.wakeup(stamps, lambda tag: peer.enqueue_stamp(stamps.path, tag), n, warm=1)
    finally:
        common.stop([proc])


def worker(system: str, draining: bool) -> None:
    from django.core.management import call_command

    if system == "djangoq":
        call_command("qcluster")
    else:
        call_command("db_worker", "--no-startup-delay", "--interval", "0.1", *(["--batch"] if draining else []))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["peers", "single", "worker"])
    p.add_argument("--system", choices=sorted(DBS), required=True)
    p.add_argument("--n", type=int, default=5_000)
    p.add_argument("--single", type=int, default=1_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--wakeups", type=int, default=15)
    p.add_argument("--window", type=float, default=12.0)
    p.add_argument("--drain", action="store_true")
    a = p.parse_args()
    if a.what == "worker":
        configure(a.system)
        return worker(a.system, a.drain)
    common.fresh_database(DBS[a.system])
    configure(a.system)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    peer = Peer(a.system)
    if a.what == "single":
        common.emit({"single": [single(peer, a.single) for _ in range(a.reps)]})
        return
    out: dict = {"bulk": [], "single": [], "drain": []}
    for _ in range(a.reps):
        out["bulk"].append(bulk(peer, a.n))
        out["single"].append(single(peer, a.single))
        out["drain"].append(drain(peer, a.n, a.window))
    out["wakeup"] = wakeup(peer, a.wakeups)
    out["wakeup"]["polling"] = True
    common.emit(out)


if __name__ == "__main__":
    main()
