"""pgqueuer in the benchmark (run in bench/.venvs/pgqueuer by bench/run.py).

Enqueue through ``SyncQueries.enqueue`` (lists = one batch insert; scalars = one job, its
own transaction in autocommit); drain with one PgQueuer process on asyncpg in drain mode
(default batch size 10, and batch 100); wake-up with an idle continuous worker.
``scale``: four worker processes against one at the default batch size, measured as
boson's scale drains are (every worker up before a job is due; the machine's CPU in the
middle of each drain), so that boson's four-processes ratio has a peer's beside it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import common  # noqa: E402

DB = "bench_pgqueuer"
#: The worker processes' ``application_name``, and what their command line holds.
WORKER_APP = "bench-pgqueuer-worker"
WORKER_MARK = b"run_pgqueuer.py\x00worker"
WORKER_LOG = "/tmp/bench-pgqueuer-worker.log"


def sync_queries():
    import psycopg
    from pgqueuer.db import SyncPsycopgDriver
    from pgqueuer.queries import SyncQueries

    conn = psycopg.connect(common.dsn(DB), autocommit=True)
    return SyncQueries(SyncPsycopgDriver(conn)), conn


def install() -> None:
    common.fresh_database(DB)

    async def go() -> None:
        import psycopg
        from pgqueuer.queries import Queries

        async with await psycopg.AsyncConnection.connect(common.dsn(DB), autocommit=True) as conn:
            await Queries.from_psycopg_connection(conn).install()

    asyncio.run(go())


def clear() -> None:
    import psycopg

    with psycopg.connect(common.dsn(DB), autocommit=True) as conn:
        conn.execute("TRUNCATE pgqueuer, pgqueuer_log")


def bulk(n: int) -> float:
    clear()
    q, conn = sync_queries()
    with conn:
        return n / common.timed(lambda: q.enqueue(["noop"] * n, [None] * n, [0] * n))


def single(n: int) -> float:
    clear()
    q, conn = sync_queries()
    with conn:
        return n / common.timed(lambda: [q.enqueue("noop", None) for _ in range(n)])


def worker(batch: int, drain: bool, stamp_path: str | None) -> None:
    """The worker process: PgQueuer on one asyncpg connection (what ``pgq run`` uses)."""

    async def go() -> None:
        import asyncpg
        from pgqueuer import PgQueuer
        from pgqueuer.types import QueueExecutionMode

        conn = await asyncpg.connect(common.dsn(DB), server_settings={"application_name": WORKER_APP})
        pgq = PgQueuer.from_asyncpg_connection(conn)

        @pgq.entrypoint("noop")
        async def noop(job) -> None:  # noqa: ANN001
            return None

        @pgq.entrypoint("stamp")
        async def stamp(job) -> None:  # noqa: ANN001
            common.send_stamp(stamp_path, job.payload.decode())

        mode = QueueExecutionMode.drain if drain else QueueExecutionMode.continuous
        await pgq.run(batch_size=batch, mode=mode)

    asyncio.run(go())


def spawn(batch: int, drain: bool, stamp_path: str = "") -> subprocess.Popen:
    cmd = [sys.executable, __file__, "worker", "--batch", str(batch), "--stamp", stamp_path] + (["--drain"] if drain else [])
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(WORKER_LOG, "ab"))


def drain(n: int, batch: int, window: float) -> float:
    clear()
    q, conn = sync_queries()
    with conn:
        for start in range(0, n, 5000):
            k = min(5000, n - start)
            q.enqueue(["noop"] * k, [None] * k, [0] * k)
    left = lambda: common.scalar(DB, "SELECT COUNT(*) FROM pgqueuer")  # noqa: E731
    return common.drain_rate(lambda: [spawn(batch, True)], lambda: n - left(), n, window_s=window)["jobs_per_s"]


def drain_started(n: int, batch: int, processes: int, window: float) -> dict:
    """A scale drain, as boson's (``bench/systems/boson.py``'s ``drain_started``): every
    worker up and waiting before a job is due. The jobs are enqueued an hour ahead and
    the workers started continuous; once each has dequeued once (past its LISTEN) one
    transaction makes every job due and wakes them together."""
    clear()
    q, conn = sync_queries()
    with conn:
        for start in range(0, n, 5000):
            k = min(5000, n - start)
            q.enqueue(["noop"] * k, [None] * k, [0] * k, [timedelta(hours=1)] * k)

        def start() -> list[subprocess.Popen]:
            procs = common.start_ready(lambda: spawn(batch, True), processes, waiting, WORKER_LOG)
            # The UPDATE leaves a dead version of every job, which each dequeue would walk
            # past (500-900 jobs/s against ~3,000) until VACUUM. The table's trigger is per
            # statement and notifies an UPDATE only when OLD is distinct from NEW (both NULL
            # there), so the workers sleep on until a DELETE, even of no row, wakes them.
            conn.execute("UPDATE pgqueuer SET execute_after = now()")
            conn.execute("VACUUM ANALYZE pgqueuer")
            conn.execute("DELETE FROM pgqueuer WHERE FALSE")
            return procs

        left = lambda: common.scalar(DB, "SELECT COUNT(*) FROM pgqueuer")  # noqa: E731
        cpu = common.CpuWindow(lambda: n - left(), n, workers=WORKER_MARK)
        rate = common.drain_rate(start, cpu, n, window_s=window)
    return {**rate, "cpu": cpu.report()}


def waiting() -> int:
    """Worker processes that have dequeued once: their LISTEN is up (it comes first)."""
    return common.scalar(DB, "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = "
                             f"'{WORKER_APP}' AND query LIKE '%SKIP LOCKED%'")


def scale(n: int, reps: int, window: float) -> dict:
    """Four processes against one, default batch, in turns (the host's drift falls on both)."""
    out: dict = {}
    for _ in range(reps):
        for processes, jobs in ((1, n), (4, n * 2)):
            drained = drain_started(jobs, 10, processes, window)
            out.setdefault(f"drain_{processes}proc", []).append(drained["jobs_per_s"])
            out.setdefault(f"cpu_{processes}proc", []).append(drained["cpu"])
    return out


def wakeup(n: int) -> dict:
    clear()
    stamps = common.Stamps()
    proc = spawn(10, False, stamps.path)
    q, conn = sync_queries()
    try:
        time.sleep(2.0)
        return common.wakeup(stamps, lambda tag: q.enqueue("stamp", tag.encode()), n)
    finally:
        common.stop([proc])
        conn.close()


def main() -> None:
    p = common.peer_parser()
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--drain", action="store_true")
    p.add_argument("--stamp", default="")
    a = p.parse_args()
    if a.what == "worker":
        return worker(a.batch, a.drain, a.stamp)
    install()
    if a.what == "scale":
        return common.emit(scale(a.n, a.reps, a.window))
    common.measure_peer(a, bulk, single, {
        "drain": lambda n, window: drain(n, 10, window),
        "drain_batch100": lambda n, window: drain(n, 100, window),
    }, wakeup)


if __name__ == "__main__":
    main()
