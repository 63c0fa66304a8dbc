"""procrastinate in the benchmark (run in bench/.venvs/procrastinate by bench/run.py).

Enqueue with ``task.batch_defer`` (one insert) and ``task.defer`` (one job per call);
drain with one worker process (``run_worker_async(wait=False)``) at concurrency 1 (its
default) and 8; wake-up with an idle worker listening (LISTEN/NOTIFY).
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

DB = "bench_procrastinate"


def make_app(stamp_path: str = ""):
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=common.dsn(DB)))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    @app.task(name="stamp")
    async def stamp(tag: str) -> None:
        common.send_stamp(stamp_path, tag)

    return app, noop, stamp


def install() -> None:
    common.fresh_database(DB)
    app, _, _ = make_app()
    with app.open():
        app.schema_manager.apply_schema()


def clear() -> None:
    import psycopg

    with psycopg.connect(common.dsn(DB), autocommit=True) as conn:
        conn.execute("TRUNCATE procrastinate_jobs CASCADE")


def bulk(n: int) -> float:
    clear()
    app, noop, _ = make_app()
    with app.open():
        return n / common.timed(lambda: noop.batch_defer(*[{} for _ in range(n)]))


def single(n: int) -> float:
    clear()
    app, noop, _ = make_app()
    with app.open():
        return n / common.timed(lambda: [noop.defer() for _ in range(n)])


def worker(concurrency: int, wait: bool, stamp_path: str) -> None:
    app, _, _ = make_app(stamp_path)

    async def go() -> None:
        async with app.open_async():
            await app.run_worker_async(concurrency=concurrency, wait=wait, install_signal_handlers=True)

    asyncio.run(go())


def spawn(concurrency: int, wait: bool, stamp_path: str = "") -> subprocess.Popen:
    cmd = [sys.executable, __file__, "worker", "--concurrency", str(concurrency), "--stamp", stamp_path]
    cmd += ["--wait"] if wait else []
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open("/tmp/bench-procrastinate-worker.log", "ab"))


def drain(n: int, concurrency: int, window: float) -> float:
    clear()
    app, noop, _ = make_app()
    with app.open():
        for start in range(0, n, 5000):
            noop.batch_defer(*[{} for _ in range(min(5000, n - start))])
    done = lambda: common.scalar(DB, "SELECT COUNT(*) FROM procrastinate_jobs WHERE status = 'succeeded'")  # noqa: E731
    return common.drain_rate(lambda: [spawn(concurrency, False)], done, n, window_s=window)["jobs_per_s"]


def wakeup(n: int) -> dict:
    clear()
    stamps = common.Stamps()
    proc = spawn(1, True, stamps.path)
    app, _, stamp = make_app(stamps.path)
    try:
        with app.open():
            time.sleep(2.0)
            return common.wakeup(stamps, lambda tag: stamp.defer(tag=tag), n)
    finally:
        common.stop([proc])


def main() -> None:
    p = common.peer_parser()
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--wait", action="store_true")
    p.add_argument("--stamp", default="")
    a = p.parse_args()
    if a.what == "worker":
        return worker(a.concurrency, a.wait, a.stamp)
    install()
    common.measure_peer(a, bulk, single, {
        "drain": lambda n, window: drain(n, 1, window),
        "drain_c8": lambda n, window: drain(n, 8, window),
    }, wakeup)


if __name__ == "__main__":
    main()
