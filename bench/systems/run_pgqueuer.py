"""pgqueuer in the benchmark (run in bench/.venvs/pgqueuer by bench/run.py).

Enqueue through ``SyncQueries.enqueue`` (lists = one batch insert; scalars = one job, its
own transaction in autocommit); drain with one PgQueuer process on asyncpg in drain mode
(default batch size 10, and batch 100); wake-up with an idle continuous worker.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
import common  # noqa: E402

DB = "bench_pgqueuer"


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

        conn = await asyncpg.connect(common.dsn(DB))
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
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open("/tmp/bench-pgqueuer-worker.log", "ab"))


def drain(n: int, batch: int, window: float) -> float:
    clear()
    q, conn = sync_queries()
    with conn:
        for start in range(0, n, 5000):
            k = min(5000, n - start)
            q.enqueue(["noop"] * k, [None] * k, [0] * k)
    left = lambda: common.scalar(DB, "SELECT COUNT(*) FROM pgqueuer")  # noqa: E731
    return common.drain_rate(lambda: [spawn(batch, True)], lambda: n - left(), n, window_s=window)["jobs_per_s"]


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
    common.measure_peer(a, bulk, single, {
        "drain": lambda n, window: drain(n, 10, window),
        "drain_batch100": lambda n, window: drain(n, 100, window),
    }, wakeup)


if __name__ == "__main__":
    main()
