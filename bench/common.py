"""Helpers every system driver shares (stdlib + psycopg only: each runs in its own venv).

A driver prints one JSON object on its last stdout line; ``bench/run.py`` collects them.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PG = dict(
    host=os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
    port=int(os.environ.get("BENCH_PG_PORT", "5432")),
    user=os.environ.get("BENCH_PG_USER", "postgres"),
)


def dsn(dbname: str) -> str:
    return f"postgresql://{PG['user']}@{PG['host']}:{PG['port']}/{dbname}"


def fresh_database(name: str) -> None:
    """Drop and create ``name`` (each system gets its own database)."""
    import psycopg

    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


#: One connection per database for :func:`scalar`, kept for the driver's life.
_SCALAR_CONNECTIONS: dict = {}


def scalar(dbname: str, sql: str) -> int:
    """One number from ``dbname``, on a connection kept between calls. Drains are polled
    with this every 50 ms: a connection per poll forked and authenticated a server backend
    each time (3.9-4.7 ms against 0.08 ms on a kept one), CPU taken from the system
    measured on a two-core machine."""
    import psycopg

    try:
        return int(_kept(dbname).execute(sql).fetchone()[0])
    except psycopg.OperationalError:  # ended by fresh_database (DROP ... WITH (FORCE)): once more
        _SCALAR_CONNECTIONS.pop(dbname).close()
        return int(_kept(dbname).execute(sql).fetchone()[0])


def _kept(dbname: str):
    import psycopg

    conn = _SCALAR_CONNECTIONS.get(dbname)
    if conn is None or conn.closed:
        conn = _SCALAR_CONNECTIONS[dbname] = psycopg.connect(dbname=dbname, autocommit=True, **PG)
    return conn


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Counter:
    """Polls a 'how many done' query on its own connection."""

    def __init__(self, count: Callable[[], int]):
        self.count = count


def drain_rate(start_workers: Callable[[], list[subprocess.Popen]], done: Callable[[], int], total: int,
               window_s: float = 12.0, startup_s: float = 60.0) -> dict:
    """Start the workers, wait for the first finished job, then measure finished jobs per
    second until all ``total`` are done or ``window_s`` has passed (bounded time).
    Startup (interpreter, imports, schema checks) is excluded, as it would be in production."""
    spawned = time.perf_counter()
    procs = start_workers()
    try:
        deadline = time.monotonic() + startup_s
        first = done()
        while first == 0:
            if time.monotonic() > deadline or any(p.poll() not in (None, 0) for p in procs):
                raise RuntimeError("workers did not start finishing jobs: " + _tails(procs))
            time.sleep(0.02)
            first = done()
        t0, n0 = time.perf_counter(), first
        n = n0
        while n < total and time.perf_counter() - t0 < window_s:
            time.sleep(0.05)
            n = done()
        elapsed = time.perf_counter() - t0
        rss = max((peak_rss_mb(p.pid) for p in procs), default=0.0)
        if n == n0:  # all done before the first look (tiny sizes): a lower bound, startup included
            return {"jobs_per_s": n / (t0 - spawned), "measured_jobs": n, "seconds": t0 - spawned,
                    "rss_mb": rss, "includes_startup": True}
        return {"jobs_per_s": (n - n0) / elapsed, "measured_jobs": n - n0, "seconds": elapsed, "rss_mb": rss}
    finally:
        stop(procs)


class CpuWindow:
    """Where the machine's CPU went during the middle of a drain: from the first progress
    poll at or past ``lo`` of its jobs to the first at or past ``hi`` (``/proc``, Linux).

    It explains a scale ratio: on a machine the database shares with the workers, four
    processes can gain at most (the cores there are / the cores one keeps busy) x (one's
    CPU per job / four's). Wraps the drain's ``done`` count, so the two snapshots fall on
    polls the drain makes anyway."""

    def __init__(self, done: Callable[[], int], total: int, lo: float = 0.2, hi: float = 0.7,
                 workers: bytes = b"boson_worker"):
        """``workers``: what the command line of a worker process of the system holds."""
        self.done, self.marks, self.workers = done, (lo * total, hi * total), workers
        self.snaps: list[tuple[int, dict]] = []

    def __call__(self) -> int:
        n = self.done()
        if len(self.snaps) < 2 and n >= self.marks[len(self.snaps)]:
            self.snaps.append((n, cpu_ticks(self.workers)))
        return n

    def report(self) -> dict:
        """Cores busy, machine CPU per finished job (us) and each part's share of the
        machine's time; empty when the drain was too short to take both snapshots."""
        if len(self.snaps) < 2 or self.snaps[1][0] == self.snaps[0][0]:
            return {}
        (n0, before), (n1, after) = self.snaps
        ticks = after["total"] - before["total"] or 1
        busy = ticks - (after["idle"] - before["idle"])
        parts = {"database": 0, "workers": 0}
        for pid, (part, used) in after["processes"].items():  # a process that started meanwhile: all of it
            parts[part] += used - before["processes"].get(pid, (part, 0))[1]
        return {"cores_busy": (os.cpu_count() or 1) * busy / ticks,
                "us_per_job": busy / os.sysconf("SC_CLK_TCK") * 1e6 / (n1 - n0),
                "database": parts["database"] / ticks, "workers": parts["workers"] / ticks,
                "idle": 1 - busy / ticks, "jobs": n1 - n0}


def cpu_ticks(workers: bytes = b"boson_worker") -> dict:
    """Clock ticks so far: the machine's (all cores, and idle) and, process by process,
    PostgreSQL's and the worker processes' (user + system): those whose command line
    holds ``workers``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    processes: dict[int, tuple[str, int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        part = "database" if comm == "postgres" else "workers" if workers in cmdline else None
        if part:
            processes[int(proc.name)] = (part, int(rest[11]) + int(rest[12]))  # utime + stime
    return {"total": sum(fields[:8]), "idle": fields[3] + fields[4], "processes": processes}


def start_ready(spawn_one: Callable[[], subprocess.Popen], processes: int, ready: Callable[[], int], log: str,
                timeout_s: float = 60.0) -> list[subprocess.Popen]:
    """Start ``processes`` workers and wait until ``ready()`` counts every one of them up; a
    worker exiting meanwhile, or ``timeout_s`` passing, stops them all and fails."""
    procs = [spawn_one() for _ in range(processes)]
    deadline = time.monotonic() + timeout_s
    while ready() < processes:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            stop(procs)
            raise RuntimeError(f"{processes} workers did not come up; see {log}")
        time.sleep(0.05)
    return procs


def _tails(procs: list[subprocess.Popen]) -> str:
    return ", ".join(f"pid {p.pid} rc={p.poll()}" for p in procs)


def peak_rss_mb(pid: int) -> float:
    """VmHWM of the process and its children (a worker may fork)."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def _children(pid: int) -> list[int]:
    try:
        out = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    kids = [int(x) for x in out]
    for k in list(kids):
        kids += _children(k)
    return kids


def stop(procs: list[subprocess.Popen], timeout: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Stamps:
    """Handlers send the wall time they started at to a Unix datagram socket: the
    parent gets it without polling a file."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="bench-")
        self.path = os.path.join(self.dir, "stamps.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(10)

    def wait(self) -> tuple[str, float]:
        data = self.sock.recv(256).decode()
        tag, at = data.split(" ")
        return tag, float(at)

    def drain(self) -> None:
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(256)
        except BlockingIOError:
            pass
        finally:
            self.sock.settimeout(10)


def send_stamp(path: str, tag: str) -> None:
    """Called inside a handler."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(f"{tag} {time.time()!r}".encode(), path)
    finally:
        s.close()


def wakeup(stamps: Stamps, enqueue_one: Callable[[str], None], n: int, warm: int = 3) -> dict:
    """Commit one job at a time with the worker idle; latency = handler start - commit."""
    import random

    lat = []
    for i in range(n + warm):
        time.sleep(random.uniform(0.05, 0.12))
        stamps.drain()
        tag = f"w{i}"
        enqueue_one(tag)  # returns once committed
        committed = time.time()
        while True:
            got, at = stamps.wait()
            if got == tag:
                break
        if i >= warm:
            lat.append((at - committed) * 1000)
    return {"p50_ms": statistics.median(lat), "p95_ms": pct(lat, 0.95), "n": len(lat)}


def emit(result: dict) -> None:
    sys.stdout.flush()
    print("BENCH-RESULT " + json.dumps(result), flush=True)


def peer_parser() -> argparse.ArgumentParser:
    """The options every peer driver takes; a driver adds its worker's own."""
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["peers", "single", "worker", "scale"])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--single", type=int, default=1_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--wakeups", type=int, default=40)
    p.add_argument("--window", type=float, default=12.0)
    return p


def measure_peer(args: argparse.Namespace, bulk: Callable[[int], float], single: Callable[[int], float],
                 drains: dict[str, Callable[[int, float], float]], wakeup: Callable[[int], dict]) -> None:
    """The same rounds for every peer: bulk, one-at-a-time and each drain configuration
    ``args.reps`` times, then the wake-up; prints the result for bench/run.py. ``single``:
    the one-at-a-time enqueue alone (bench/run.py's turns)."""
    if args.what == "single":
        emit({"single": [single(args.single) for _ in range(args.reps)]})
        return
    out: dict = {"bulk": [], "single": [], **{name: [] for name in drains}}
    for _ in range(args.reps):
        out["bulk"].append(bulk(args.n))
        out["single"].append(single(args.single))
        for name, drain in drains.items():
            out[name].append(drain(args.n, args.window))
    out["wakeup"] = wakeup(args.wakeups)
    emit(out)
