"""The CPU cost of a one-job enqueue (``services.enqueue([envelope])`` outside any
transaction, as bench/systems/boson.py's one-at-a-time measures it), this checkout
against another, in alternating rounds on PostgreSQL:

    python bench/enqueue_cost.py --base /path/to/other/checkout [--n 2000] [--rounds 10]

Each checkout runs in a process of its own, on a database of its own (``--db`` prefix),
set up once; the rounds alternate between them, so the host's load falls on both alike.
Per call: the client's CPU (``time.process_time``), its server backend's CPU (``/proc``,
when the server is on this host) and the wall time; medians of the rounds. ``--base``
alone leaves out the comparison (this checkout only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def serve(db: str) -> None:
    """One checkout's process: set up, then one round per line read, one JSON line each."""
    root = Path(os.environ.get("BENCH_BOSON_ROOT") or BENCH.parent)
    sys.path[:0] = [str(BENCH), str(root)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")
    os.environ["BENCH_PG_NAME"] = db
    import common

    common.fresh_database(db)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    import boson_django
    from django.db import connection

    from boson_django import services

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    print(json.dumps({"ready": boson_django.__file__}), flush=True)
    for line in sys.stdin:
        n = int(line)
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE boson_job, boson_run, boson_job_data, boson_throughput_minute")
        envelopes = [services.Envelope(task="bench_tasks.noop", queue="default") for _ in range(n)]
        server, cpu, wall = _server_cpu(backend), time.process_time(), time.perf_counter()
        for envelope in envelopes:
            services.enqueue([envelope])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server = _server_cpu(backend) - server if server is not None else None
        print(json.dumps({"cpu_us": cpu / n * 1e6, "wall_us": wall / n * 1e6,
                          "server_us": None if server is None else server / n * 1e6}), flush=True)
    common.fresh_database(db)  # leaves an empty database: dropped by the driver


def _server_cpu(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(name: str, root: Path | None, db: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(BENCH))
    env.pop("BENCH_BOSON_ROOT", None)
    if root is not None:
        env["BENCH_BOSON_ROOT"] = str(root)
    proc = subprocess.Popen([sys.executable, __file__, "--serve", db], env=env, cwd=str(BENCH),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = json.loads(proc.stdout.readline())
    print(f"{name}: {ready['ready']}", flush=True)
    return proc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--base", type=Path, help="the other checkout (the code before)")
    parser.add_argument("--n", type=int, default=2000, help="enqueues per round")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per checkout")
    parser.add_argument("--db", default="bench_enqueue_cost", help="database name prefix")
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve)
    systems = {"new": _start("new", None, f"{args.db}_new")}
    if args.base:
        systems["base"] = _start("base", args.base.resolve(), f"{args.db}_base")
    results: dict[str, list[dict]] = {name: [] for name in systems}
    for i in range(args.rounds):
        order = list(systems) if i % 2 == 0 else list(reversed(systems))
        for name in order:
            proc = systems[name]
            proc.stdin.write(f"{args.n}\n")
            proc.stdin.flush()
            results[name].append(json.loads(proc.stdout.readline()))
            r = results[name][-1]
            print(f"round {i + 1} {name}: cpu {r['cpu_us']:.1f} us, wall {r['wall_us']:.1f} us, "
                  f"server {r['server_us'] or 0:.1f} us", flush=True)
    for proc in systems.values():
        proc.stdin.close()
        proc.wait()
    _drop([f"{args.db}_{name}" for name in systems])
    for name, rounds in results.items():
        summary = {key: round(statistics.median(r[key] for r in rounds), 1)
                   for key in ("cpu_us", "wall_us", "server_us") if rounds[0][key] is not None}
        print(json.dumps({"system": name, "rounds": len(rounds), "n": args.n, **summary}))


def _drop(names: list[str]) -> None:
    import psycopg

    sys.path.insert(0, str(BENCH))
    import common

    with psycopg.connect(dbname="postgres", autocommit=True, **common.PG) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
