"""boson_django in the benchmark. Run by bench/run.py in bench/.venvs/boson:

    python bench/systems/boson.py peers|single|scale|sqlite|long|... [--n N] [--reps R]

``peers``: the measurements every system gets (bulk, one-at-a-time, drain, wake-up);
``single``: the one-at-a-time enqueue alone (bench/run.py's turns);
``scale``: boson-only (admission at 10k vs 1M queued, 4 processes vs 1 at the
given and at the default concurrency, RSS at concurrency 32, a long drain's first fifth
against its last); ``scale-pairs``: only its 4-against-1 pairs; ``scale-but-pairs``: the
rest of it; ``long``: that long drain alone (``--long N``); ``sqlite``: drain with one
worker on SQLite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
#: BENCH_BOSON_ROOT measures another checkout of boson_django (before/after comparisons).
ROOT = Path(os.environ.get("BENCH_BOSON_ROOT") or BENCH.parent)
sys.path[:0] = [str(BENCH), str(ROOT)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")

import common  # noqa: E402

DB = os.environ.get("BENCH_BOSON_DB", "bench_boson")
NOOP = "bench_tasks.noop"


def setup(db: str = DB) -> None:
    if os.environ.get("BENCH_DB", "postgres") == "postgres":
        os.environ["BENCH_PG_NAME"] = db
        common.fresh_database(db)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def envelopes(n: int, queue: str = "default") -> list:
    from boson_django.services import Envelope

    return [Envelope(task=NOOP, queue=queue) for _ in range(n)]


def truncate() -> None:
    from django.db import connection

    with connection.cursor() as c:
        if connection.vendor == "postgresql":
            c.execute("TRUNCATE boson_job, boson_run, boson_job_data, boson_throughput_minute")
        else:
            for t in ("boson_job", "boson_run", "boson_job_data", "boson_throughput_minute"):
                c.execute(f"DELETE FROM {t}")


def count(sql: str) -> int:
    """One number from the store, on the driver's own connection, kept between calls as
    ``common.scalar`` keeps the peers' (a drain is polled with it every 50 ms)."""
    from django.db import connection

    with connection.cursor() as c:
        c.execute(sql)
        return c.fetchone()[0]


def completed() -> int:
    return count("SELECT COUNT(*) FROM boson_job WHERE state = 'completed'")


def counted() -> int:
    """Completed jobs as the throughput counter has them: written in each ack's own
    transaction, so exact, and a handful of rows to sum where ``completed`` scans the job
    table -- 5 ms a poll at 20,000 jobs, a tenth of a core every 50 ms, taken from the
    workers being measured. The scale drains poll this (the peer drains keep a count on
    each system's own job table, alike for all)."""
    return count("SELECT COALESCE(SUM(count), 0) FROM boson_throughput_minute WHERE outcome = 'completed'")


def bulk(n: int) -> float:
    from boson_django import services

    truncate()
    envs = envelopes(n)
    return n / common.timed(lambda: services.enqueue(envs))


def one_at_a_time(n: int) -> float:
    from boson_django import services

    truncate()
    envs = envelopes(n)
    return n / common.timed(lambda: [services.enqueue([e]) for e in envs])


def worker_cmd(concurrency: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "django", "boson_worker", "--concurrency", str(concurrency),
            "--verbosity", "0", *extra]


def spawn(cmd: list[str], log: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), str(ROOT)]))
    return subprocess.Popen(cmd, env=env, cwd=str(BENCH), stdout=subprocess.DEVNULL, stderr=open(log, "ab"))


def queue_fresh(n: int) -> None:
    """Empty the store (runs too), then queue ``n`` no-op jobs."""
    from boson_django import services

    truncate()
    services.enqueue(envelopes(n))


def burst_worker(concurrency: int) -> subprocess.Popen:
    return spawn(worker_cmd(concurrency, "--burst"), os.path.join(tempfile.gettempdir(), "bench-boson-worker.log"))


def drain(n: int, concurrency: int, processes: int = 1, window_s: float = 12.0) -> dict:
    queue_fresh(n)
    start = lambda: [burst_worker(concurrency) for _ in range(processes)]  # noqa: E731
    return common.drain_rate(start, completed, n, window_s=window_s)


def drain_started(n: int, concurrency: int, processes: int, window_s: float = 12.0) -> dict:
    """The scale drains: every worker process up before any job can be claimed. The jobs
    wait in a paused queue while the workers start (not in burst mode: a burst worker
    finding nothing claimable exits); once each has its LISTEN connection the queue is
    resumed and they are woken together. Started in burst mode on a queue already full,
    the first process finished jobs while the other three were still importing Django,
    and their start-up CPU fell into the measured window."""
    from boson_django import services

    queue_fresh(n)
    services.pause_queue("default")
    log = os.path.join(tempfile.gettempdir(), "bench-boson-worker.log")

    def start() -> list[subprocess.Popen]:
        procs = common.start_ready(lambda: spawn(worker_cmd(concurrency), log), processes, listening, log)
        time.sleep(0.5)  # the thread pool is made right after the LISTEN connection
        services.resume_queue("default")  # its NOTIFY wakes them all
        return procs

    cpu = common.CpuWindow(counted, n)
    rate = common.drain_rate(start, cpu, n, window_s=window_s)
    counter, finished = counted(), completed()
    if counter != finished:  # the workers have stopped: the two must agree
        raise RuntimeError(f"throughput counter {counter} != completed jobs {finished}")
    return {**rate, "cpu": cpu.report()}


def listening() -> int:
    """Worker processes whose LISTEN connection is up."""
    return count("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'")


def wakeup(n: int) -> dict:
    from bench_tasks import stamp

    truncate()  # a drain cut off by its window leaves jobs queued: the wake-up needs an empty queue
    stamps = common.Stamps()
    log = os.path.join(tempfile.gettempdir(), "bench-boson-wakeup.log")
    proc = spawn(worker_cmd(1), log)
    try:
        time.sleep(2.0)
        return common.wakeup(stamps, lambda tag: stamp.enqueue(stamps.path, tag), n)
    finally:
        common.stop([proc])


def peers(args: argparse.Namespace) -> dict:
    setup()
    best = f"drain_c{args.concurrency}"
    out: dict = {"bulk": [], "single": [], "drain": [], best: [], "wakeup": []}
    for _ in range(args.reps):
        out["bulk"].append(bulk(args.n))
        out["single"].append(one_at_a_time(args.single))
        out["drain"].append(drain(args.n, 10, window_s=args.window)["jobs_per_s"])  # BOSON["CONCURRENCY"] default
        out[best].append(drain(args.n, args.concurrency, window_s=args.window)["jobs_per_s"])
    out["wakeup"] = wakeup(args.wakeups)
    return out


def admission_ms(batches: int, batch: int) -> float:
    """Median time of one admit(batch) + acks, with the queue as it is."""
    from boson_django import services
    from boson_django.services import Outcome

    times = []
    for _ in range(batches):
        t = time.perf_counter()
        units = services.admit("bench", ["default"], batch)
        times.append((time.perf_counter() - t) * 1000)
        for unit in units:
            services.ack(unit.lease, Outcome.SUCCESS)
    return statistics.median(times)


def fill(n: int) -> None:
    """Queue ``n`` available jobs fast (setup only: raw INSERT ... SELECT, not the API)."""
    from django.db import connection

    with connection.cursor() as c:
        c.execute(
            "INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight,"
            " max_attempts, retention_ms, lease_ms, crash_limit, attempt, crash_attempt, fence, charged_weight,"
            " last_error, run_at, enqueued_at) SELECT 'fill' || lpad(g::text, 9, '0'), %s, 'default', 'available', 0,"
            " '[]', '{}', '{}', 'f', 1, 20, 86400000, 30000, 3, 0, 0, 0, 0, '', now(), now()"
            " FROM generate_series(1, %s) g",
            [NOOP, n],
        )
        c.execute("ANALYZE boson_job")


def scale(args: argparse.Namespace) -> dict:
    """Everything the scale targets need: admission by queue size, the pairs, RSS, the long drain."""
    setup()
    return {**queue_sizes(args), **pairs(args), **long_and_rss(args)}


def queue_sizes(args: argparse.Namespace) -> dict:
    """``admit(100)`` with 10,000 queued and with ``args.big`` queued."""
    out: dict = {}
    for queued in (10_000, args.big):
        truncate()
        fill(queued)
        out[f"admit_ms_{queued}"] = [admission_ms(30, 100) for _ in range(args.reps)]
    truncate()
    return out


def pairs(args: argparse.Namespace) -> dict:
    """One process against four, at ``args.concurrency`` and at the default, in turns so
    that the host's drift falls on both alike. ``bench/run.py`` runs one rep at a time,
    between the peer's, so that both systems' ratios come from the same minutes."""
    out: dict = {}
    for key, concurrency in (("", args.concurrency), ("_default", default_concurrency())):
        for _ in range(args.reps):
            for processes, n in ((1, args.n), (4, args.n * 2)):
                drained = drain_started(n, concurrency, processes, window_s=args.window)
                out.setdefault(f"drain_{processes}proc{key}", []).append(drained["jobs_per_s"])
                out.setdefault(f"cpu_{processes}proc{key}", []).append(drained["cpu"])
    return out


def long_and_rss(args: argparse.Namespace) -> dict:
    out: dict = {"rss_mb_c32": drain(args.n, 32, 1, window_s=args.window)["rss_mb"]}
    long = long_drain(args.long, args.concurrency)
    out["long_first_fifth"], out["long_last_fifth"] = long["first_fifth"], long["last_fifth"]
    return out


def scale_but_pairs(args: argparse.Namespace) -> dict:
    setup()
    return {**queue_sizes(args), **long_and_rss(args)}


def scale_pairs(args: argparse.Namespace) -> dict:
    setup()
    return pairs(args)


def long_drain(n: int, concurrency: int, timeout_s: float = 300.0) -> dict:
    """One burst worker through ``n`` queued jobs from an empty run table (a new store):
    the rate over the first fifth of the drain against the last fifth. Equal when a claim
    costs the same however many runs are stored; a plan that reads the run table per claim
    shows as a last fifth several times slower."""
    queue_fresh(n)
    proc = burst_worker(concurrency)
    fifth = n // 5
    marks = [fifth, n - fifth, n]  # completed counts: end of the first fifth, start and end of the last
    seen: dict[int, float] = {}
    try:
        deadline = time.monotonic() + timeout_s
        t0 = None
        while len(seen) < len(marks) and time.monotonic() < deadline and proc.poll() in (None, 0):
            done = counted()
            now = time.perf_counter()
            if t0 is None and done:
                t0 = now
            seen.update({m: now for m in marks if done >= m and m not in seen})
            time.sleep(0.1)
    finally:
        common.stop([proc])
    if t0 is None or len(seen) < len(marks):
        raise RuntimeError(f"the long drain did not finish ({counted()} of {n} in {timeout_s:.0f} s)")
    return {"first_fifth": fifth / max(seen[marks[0]] - t0, 1e-3),
            "last_fifth": fifth / max(seen[marks[2]] - seen[marks[1]], 1e-3),
            "seconds": seen[marks[2]] - t0}


def default_concurrency() -> int:
    """What ``boson_worker`` runs with when given no ``--concurrency``."""
    from boson_django import conf

    return conf.get().CONCURRENCY


def sqlite(args: argparse.Namespace) -> dict:
    os.environ["BENCH_DB"] = "sqlite"
    os.environ["BENCH_SQLITE_PATH"] = os.path.join(tempfile.mkdtemp(prefix="bench-sqlite-"), "boson.sqlite3")
    setup()
    return {"drain": [drain(args.n, args.concurrency, window_s=args.window)["jobs_per_s"] for _ in range(args.reps)]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["peers", "single", "scale", "scale-pairs", "scale-but-pairs", "sqlite", "drain", "enqueue", "wakeup", "long"])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--single", type=int, default=1_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--wakeups", type=int, default=40)
    parser.add_argument("--window", type=float, default=12.0)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--long", type=int, default=150_000, help="jobs in the long drain (scale, long)")
    parser.add_argument("--started", action="store_true", help="drain: as the scale drains (every worker up first)")
    args = parser.parse_args()
    if args.what == "wakeup":
        setup()
        result = {"wakeup": [wakeup(args.wakeups) for _ in range(args.reps)]}
    elif args.what == "single":
        setup()
        result = {"single": [one_at_a_time(args.single) for _ in range(args.reps)]}
    elif args.what == "enqueue":
        setup()
        result = {"bulk": [bulk(args.n) for _ in range(args.reps)], "single": [one_at_a_time(args.single) for _ in range(args.reps)]}
    elif args.what == "long":
        setup()
        result = {"long_drain": [long_drain(args.long, args.concurrency) for _ in range(args.reps)]}
    elif args.what == "drain":
        setup()
        measure = drain_started if args.started else drain
        result = {"drain": [measure(args.n, args.concurrency, args.processes, args.window) for _ in range(args.reps)]}
    else:
        result = {"peers": peers, "scale": scale, "scale-pairs": scale_pairs, "scale-but-pairs": scale_but_pairs,
                  "sqlite": sqlite}[args.what](args)
    common.emit(result)


if __name__ == "__main__":
    main()
