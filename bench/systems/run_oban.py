"""Oban (the Python port) in the benchmark (run in bench/.venvs/oban, Python >= 3.12).

Enqueue with ``Oban.enqueue_many`` (one insert) and ``Oban.enqueue`` (one job per call);
drain with one process running queue ``default`` at limits 10 and 50; wake-up with an
idle node (Oban's PostgreSQL notifier).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
import common  # noqa: E402

DB = "bench_oban"


async def pool():
    from oban import Oban

    return await Oban.create_pool(common.dsn(DB), min_size=1, max_size=4)


def install() -> None:
    common.fresh_database(DB)

    async def go() -> None:
        from oban.schema import install as install_schema

        p = await pool()
        await install_schema(p)
        await p.close()

    asyncio.run(go())


def clear() -> None:
    import psycopg

    with psycopg.connect(common.dsn(DB), autocommit=True) as conn:
        conn.execute("TRUNCATE oban_jobs")


def client_run(fn) -> float:
    """Time ``fn(oban)`` on a client-mode Oban instance (no queues)."""

    async def go() -> float:
        from oban import Oban

        p = await pool()
        async with Oban(pool=p) as oban:
            start = time.perf_counter()
            await fn(oban)
            took = time.perf_counter() - start
        await p.close()
        return took

    return asyncio.run(go())


def bulk(n: int) -> float:
    from oban_jobs import noop

    clear()
    return n / client_run(lambda oban: oban.enqueue_many([noop.new() for _ in range(n)]))


def single(n: int) -> float:
    from oban_jobs import noop

    clear()

    async def each(oban) -> None:
        for _ in range(n):
            await oban.enqueue(noop.new())

    return n / client_run(each)


def worker(limit: int) -> None:
    async def go() -> None:
        from oban import Oban

        import oban_jobs  # noqa: F401 -- registers the workers

        p = await pool()
        async with Oban(pool=p, queues={"default": limit}):
            await asyncio.Event().wait()

    asyncio.run(go())


def spawn(limit: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "worker", "--limit", str(limit)], stdout=subprocess.DEVNULL,
                            stderr=open("/tmp/bench-oban-worker.log", "ab"))


def drain(n: int, limit: int, window: float) -> float:
    from oban_jobs import noop

    clear()

    async def fill(oban) -> None:
        for start in range(0, n, 5000):
            await oban.enqueue_many([noop.new() for _ in range(min(5000, n - start))])

    client_run(fill)
    done = lambda: common.scalar(DB, "SELECT COUNT(*) FROM oban_jobs WHERE state = 'completed'")  # noqa: E731
    return common.drain_rate(lambda: [spawn(limit)], done, n, window_s=window)["jobs_per_s"]


def wakeup(n: int) -> dict:
    from oban_jobs import stamp

    clear()
    stamps = common.Stamps()
    proc = spawn(10)

    async def go() -> dict:
        from oban import Oban

        p = await pool()
        loop = asyncio.get_running_loop()
        async with Oban(pool=p) as oban:
            await asyncio.sleep(2.0)

            def one(tag: str) -> None:
                asyncio.run_coroutine_threadsafe(oban.enqueue(stamp.new(stamps.path, tag)), loop).result()

            result = await asyncio.to_thread(common.wakeup, stamps, one, n)
        await p.close()
        return result

    try:
        return asyncio.run(go())
    finally:
        common.stop([proc])


def main() -> None:
    p = common.peer_parser()
    p.add_argument("--limit", type=int, default=10)
    a = p.parse_args()
    if a.what == "worker":
        return worker(a.limit)
    install()
    common.measure_peer(a, bulk, single, {
        "drain": lambda n, window: drain(n, 10, window),
        "drain_limit50": lambda n, window: drain(n, 50, window),
    }, wakeup)


if __name__ == "__main__":
    main()
