"""The benchmark: boson_django and its peers, same machine, same PostgreSQL, same run.

    python bench/run.py            # everything, medians of three runs (about 10-14 minutes)
    python bench/run.py --quick    # tiny sizes, one run: a smoke test (no timing assertions)
    python bench/run.py --only boson,pgqueuer --skip-scale

Each system runs in its own virtualenv under bench/.venvs/ (created on first use and
installed from the package registry) against its own database on the local PostgreSQL
(``BENCH_PG_HOST``/``BENCH_PG_PORT``/``BENCH_PG_USER``; default 127.0.0.1:5432, postgres).
No-op tasks. Per system: bulk enqueue, one-at-a-time enqueue (a transaction each), drain
with one worker process (each system's default and its best configuration, bounded to
``--window`` seconds of measuring), and wake-up latency (commit -> handler start with an
idle worker) where the system wakes on NOTIFY. Boson only: admission time per batch at
10,000 vs 1,000,000 queued jobs, 4 worker processes vs 1 (at concurrency 256 and at the
default; with where the machine's CPU went in the middle of each drain), worker RSS at
concurrency 32, SQLite drain with one worker. pgqueuer's four processes against one (its
default batch, measured the same way) follow boson's, so that the four-processes ratio has
a peer's beside it; before them, ``machine_scaling.py`` measures what four busy processes
of pure Python get done on this machine against one, with no database, so that the ratio
has the machine's own ceiling beside it too. Results: a table on stdout and
bench/results/<stamp>.json. The systems take turns: every system's first rep,
then every system's second, and so on, so that the host's drift from minute to minute
falls on all of them alike. The one-at-a-time enqueue, under a second for each system,
takes turns of its own after the reps (``--single-turns``, five by default): each
system's driver measures it alone, one system right after another, and the table reports
the median of the turns.

With ``--quick`` the exit status is 1 when any system could not be installed, its driver
failed, or a measurement came back empty (CI runs it so that no driver can rot); a peer
skipped because no Python >= 3.12 was found is reported and does not fail the run.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENVS = BENCH / ".venvs"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import machine_scaling  # noqa: E402

#: name -> (driver script, pip requirements, needs Python >= 3.12, extra driver args)
SYSTEMS: dict[str, tuple[str, list[str], bool, list[str]]] = {
    "boson": ("systems/boson.py", ["-e", f"{ROOT}[postgres-binary]"], False, ["--concurrency", "1024"]),
    "pgqueuer": ("systems/run_pgqueuer.py", ["pgqueuer", "psycopg[binary]", "asyncpg"], False, []),
    "procrastinate": ("systems/run_procrastinate.py", ["procrastinate", "psycopg[binary]"], False, []),
    "oban": ("systems/run_oban.py", ["oban", "psycopg[binary]", "psycopg-pool"], True, []),
    "django-q2": ("systems/run_django_peers.py", ["django-q2", "psycopg[binary]"], False, ["--system", "djangoq"]),
    "django-tasks-db": ("systems/run_django_peers.py", ["django>=6.1", "django-tasks-db", "psycopg[binary]"], True,
                        ["--system", "tasksdb"]),
}
#: Keys of each driver's result holding drain rates (the best one is reported).
#: Each worker's slots in the 4-processes-vs-1 measurement (also measured at the default).
SCALE_CONCURRENCY = 256
#: The peer whose four worker processes are measured against one beside boson's.
SCALE_PEER = "pgqueuer"
#: Scale results that explain a measurement rather than make one (where the CPU went): a
#: drain too short for both of its snapshots has none, and fails nothing.
PROFILE_PREFIX = "cpu_"
DRAIN_KEYS = ("drain", "drain_batch100", "drain_c8", "drain_limit50", "drain_c1024")


def python_312() -> str | None:
    """An interpreter >= 3.12 that really runs (a pyenv shim may exist for an unselected one)."""
    candidates = [shutil.which(n) for n in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")), reverse=True)
    for exe in filter(None, candidates):
        try:
            out = subprocess.run([exe, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                                 capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == "True":
            return exe
    return None


#: Why a system was skipped rather than failed: its interpreter is not on this machine.
NO_PYTHON_312 = "needs Python >= 3.12 and none was found"


def tail(text: str, lines: int) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def venv_python(name: str) -> tuple[str | None, str]:
    """The system's venv interpreter, creating and installing it if needed; or (None, why)."""
    _, reqs, needs_312, _ = SYSTEMS[name]
    folder = VENVS / name
    exe = folder / "bin" / "python"
    marker = folder / ".installed"
    if marker.exists():
        return str(exe), ""
    base = python_312() if needs_312 else sys.executable
    if base is None:
        return None, NO_PYTHON_312
    print(f"[bench] creating {folder} with {base}: pip install {' '.join(reqs)}", flush=True)
    venv = subprocess.run([base, "-m", "venv", "--clear", str(folder)], capture_output=True, text=True)
    if venv.returncode != 0:
        print(tail(venv.stderr or venv.stdout, 20), flush=True)
        return None, f"creating the virtualenv failed (exit {venv.returncode})"
    pip = subprocess.run([str(exe), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        print(tail(pip.stderr or pip.stdout, 20), flush=True)
        return None, f"pip install failed (exit {pip.returncode}): " + (tail(pip.stderr or pip.stdout, 1)[:200] or "no output")
    marker.write_text(" ".join(reqs))
    return str(exe), ""


def run_driver(name: str, exe: str, args: list[str], timeout: float) -> dict:
    script, _, _, extra = SYSTEMS[name]
    cmd = [exe, str(BENCH / script), *args, *extra]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(BENCH))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-RESULT ")]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        why = f"exit {proc.returncode}" + ("" if lines else ", no BENCH-RESULT line")
        # The driver's own traceback, so that a failure is readable in a CI log.
        print(f"[bench] {name} {' '.join(args[:1])}: driver output (last 30 lines):\n"
              + tail(proc.stderr + "\n" + proc.stdout, 30), flush=True)
        return {"error": f"{why}: {' | '.join(last)[:300]}"}
    try:
        result = json.loads(lines[-1][len("BENCH-RESULT "):])
    except ValueError as exc:
        return {"error": f"unreadable BENCH-RESULT line: {exc}"}
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def empty(values: dict[str, object]) -> list[str]:
    """The measurements that came back missing or not a positive number (a "—" in the table)."""
    return [k for k, v in values.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0]


def med(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def merged(before: dict | None, rep: dict) -> dict:
    """One system's results over its reps so far: each rate list grows by the rep's; the
    wake-up percentiles are the medians of the reps' (each rep times its own wake-ups)."""
    out = dict(before or {})
    for key, value in rep.items():
        if isinstance(value, list):
            out[key] = out.get(key, []) + value
    out["seconds"] = round(out.get("seconds", 0) + rep.get("seconds", 0), 1)
    if rep.get("wakeup"):
        reps = out["wakeups"] = out.get("wakeups", []) + [rep["wakeup"]]
        out["wakeup"] = {**reps[0], "n": sum(w.get("n", 0) for w in reps),
                         "p50_ms": med([w["p50_ms"] for w in reps]), "p95_ms": med([w["p95_ms"] for w in reps])}
    return out


def single_turns(ready: dict[str, str], errors: dict[str, str], raw: dict[str, dict], turns: int, n: str) -> None:
    """The one-at-a-time enqueue again, alone, the systems one right after another, ``turns``
    times (into ``single_turns``). Inside the reps each system's was 20-40 s from the
    next system's; this host's speed swings by a third within a minute (boson's and
    pgqueuer's rounds of 2026-12-02, 02:00: 0.58x, 1.19x, 0.94x), and one-at-a-time, a
    commit each, is the measurement that swing moves most."""
    for turn in range(turns):
        for name, exe in ready.items():
            if name in errors:
                continue
            result = run_driver(name, exe, ["single", "--single", n, "--reps", "1"], timeout=300)
            if "error" in result:
                errors[name] = result["error"]
                print(f"[bench] {name}: FAILED {result['error']}", flush=True)
                continue
            raw[name]["single_turns"] = raw[name].get("single_turns", []) + result["single"]
        line = ", ".join(f"{name} {raw[name]['single_turns'][-1]:,.0f}" for name in ready if name not in errors)
        print(f"[bench] one-at-a-time, turn {turn + 1} of {turns}: {line}", flush=True)


def summary(result: dict) -> dict:
    drains = {k: med(result.get(k)) for k in DRAIN_KEYS if result.get(k)}
    best = max(drains, key=lambda k: drains[k]) if drains else None  # type: ignore[arg-type,return-value]
    wake = result.get("wakeup") or {}
    return {
        "bulk": med(result.get("bulk")), "single": med(result.get("single_turns") or result.get("single")),
        "drain_default": drains.get("drain"), "drain_best": drains.get(best) if best else None, "drain_best_config": best,
        "wake_p50": wake.get("p50_ms"), "wake_p95": wake.get("p95_ms"), "wake_polling": wake.get("polling", False),
    }


def fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    return f"{v:,.1f}{unit}" if v < 100 else f"{v:,.0f}{unit}"


def ratio(ours: float | None, theirs: float | None, lower_is_better: bool = False) -> str:
    if not ours or not theirs:
        return "—"
    return f"{(theirs / ours if lower_is_better else ours / theirs):.2f}x"


def table(summaries: dict[str, dict], errors: dict[str, str]) -> str:
    rows = ["| system | bulk enqueue (jobs/s) | one-at-a-time (jobs/s) | drain, 1 process: default / best (jobs/s) "
            "| wake-up p50 / p95 (ms) |", "|---|---|---|---|---|"]
    for name, s in summaries.items():
        wake = f"{fmt(s['wake_p50'])} / {fmt(s['wake_p95'])}" + (" (polling)" if s["wake_polling"] else "")
        best = f"{fmt(s['drain_best'])} ({s['drain_best_config']})" if s["drain_best_config"] != "drain" else fmt(s["drain_best"])
        rows.append(f"| {name} | {fmt(s['bulk'])} | {fmt(s['single'])} | {fmt(s['drain_default'])} / {best} | {wake} |")
    for name, why in errors.items():
        rows.append(f"| {name} | {why if why.startswith('skipped') else 'failed: ' + why} | | | |")
    boson = summaries.get("boson")
    if boson:
        rows += ["", "| boson vs | bulk | one-at-a-time | drain (best vs best) | wake-up p50 (>1 = boson faster) |",
                 "|---|---|---|---|---|"]
        for name, s in summaries.items():
            if name != "boson":
                rows.append(f"| {name} | {ratio(boson['bulk'], s['bulk'])} | {ratio(boson['single'], s['single'])} | "
                            f"{ratio(boson['drain_best'], s['drain_best'])} | "
                            f"{ratio(boson['wake_p50'], s['wake_p50'], lower_is_better=True)} |")
    return "\n".join(rows)


def scale_table(scale: dict, sqlite: dict, peer: dict | None = None, machine: dict | None = None) -> str:
    rows = ["| boson only | median | target |", "|---|---|---|"]
    small, big = med(scale.get("admit_ms_10000")), next((med(v) for k, v in scale.items()
                                                         if k.startswith("admit_ms_") and k != "admit_ms_10000"), None)
    big_n = next((k[len("admit_ms_"):] for k in scale if k.startswith("admit_ms_") and k != "admit_ms_10000"), "?")
    rows.append(f"| admit(100) at 10,000 queued | {fmt(small, ' ms')} | |")
    rows.append(f"| admit(100) at {int(big_n):,} queued | {fmt(big, ' ms')} | within 1.5x: "
                f"{(big / small if small and big else 0):.2f}x |")
    for key, how in (("", f"concurrency {SCALE_CONCURRENCY}"), ("_default", "default concurrency")):
        rows += four_against_one(scale, key, how, ">= 1.5x")
    if peer:
        rows += four_against_one(peer, "", f"{SCALE_PEER}'s default batch (10)", "the peer's")
    if machine:
        rows.append(machine_row(machine))
    rows.append(f"| worker RSS at concurrency 32 | {fmt(scale.get('rss_mb_c32'), ' MB')} | < 150 MB |")
    first, last = scale.get("long_first_fifth"), scale.get("long_last_fifth")
    rows.append(f"| long drain from an empty run table, 1 process: first fifth / last fifth | "
                f"{fmt(first, '')} / {fmt(last, ' jobs/s')} | steady: {(last / first if first and last else 0):.2f}x |")
    rows.append(f"| SQLite drain, 1 process | {fmt(med(sqlite.get('drain')), ' jobs/s')} | >= 2,000 jobs/s |")
    return "\n".join(rows)


def machine_row(machine: dict) -> str:
    """What four busy processes get done on this machine with no database or queue in the
    way (``machine_scaling.py``): the most any system's four could gain over a one that
    kept a whole core busy by itself."""
    rounds = ", ".join(f"{r:.2f}x" for r in machine["rounds"]["4"])
    return (f"| the machine alone, pure Python, no database: 4 busy processes against 1 | "
            f"{machine['median']['4']:.2f}x (rounds {rounds}) | the ceiling for CPU-bound processes |")


def four_against_one(scale: dict, key: str, how: str, target: str) -> list[str]:
    """The rows of one four-processes-against-one measurement: the two drains, their ratio
    and where the machine's CPU went."""
    one, four = med(scale.get(f"drain_1proc{key}")), med(scale.get(f"drain_4proc{key}"))
    return [f"| drain, 1 process, {how} | {fmt(one, ' jobs/s')} | |",
            f"| drain, 4 processes, {how} each | {fmt(four, ' jobs/s')} | "
            f"{target}: {(four / one if one and four else 0):.3f}x |",  # three places: 1.496 is not 1.50
            cpu_row(scale.get(f"cpu_1proc{key}"), scale.get(f"cpu_4proc{key}"))]


def cpu_row(one: list[dict] | None, four: list[dict] | None) -> str:
    """The machine's CPU in the middle of the drains above (medians over the reps), and
    the most four processes could gain over one from it: (the cores there are / the cores
    one keeps busy) x (one's CPU per job / four's)."""
    def pair(key: str) -> tuple[float | None, float | None]:
        return med([r[key] for r in one or [] if r]), med([r[key] for r in four or [] if r])

    def shown(key: str, form: str) -> str:
        return " / ".join("—" if v is None else format(v, form) for v in pair(key))

    cores, us, n = pair("cores_busy"), pair("us_per_job"), os.cpu_count() or 1
    ceiling = f"{n / cores[0] * us[0] / us[1]:.2f}x" if cores[0] and us[0] and us[1] else "—"
    return (f"| CPU mid-drain, 1 process / 4: cores busy {shown('cores_busy', '.2f')} of {n}, "
            f"{shown('us_per_job', '.0f')} us per job; PostgreSQL {shown('database', '.0%')}, "
            f"workers {shown('workers', '.0%')}, idle {shown('idle', '.0%')} | | four can gain at most {ceiling} |")


def scale_in_turns(exe: str, peer_exe: str | None, quick: bool, reps: int, window: float) -> dict[str, dict]:
    """boson's scale measurements and the peer's four processes against one. Each rep of
    boson's pairs runs right before the peer's, so that both systems' ratios come from the
    same minutes: run one after the other, in blocks of three reps each, the peer measured
    1.52x in one run and 1.15x eleven minutes later on the same host (2026-12-03)."""
    size = ["--n", "400", "--window", "2"] if quick else ["--n", "20000", "--window", str(window)]
    turns = {"boson-scale": ("boson", exe, ["scale-pairs", *size, "--concurrency", str(SCALE_CONCURRENCY)])}
    if peer_exe:
        turns[f"{SCALE_PEER}-scale"] = (SCALE_PEER, peer_exe, ["scale", *size])
    out: dict[str, dict] = {}
    for rep in range(reps):
        for part, (name, python, args) in turns.items():
            if "error" in out.get(part, {}):
                continue
            print(f"[bench] {part}: four processes against one (rep {rep + 1} of {reps}) ...", flush=True)
            result = run_driver(name, python, [*args, "--reps", "1"], timeout=600)
            out[part] = result if "error" in result else merged(out.get(part), result)
    rest = (["scale-but-pairs", "--n", "400", "--big", "20000", "--window", "2", "--reps", "1", "--long", "3000"] if quick
            else ["scale-but-pairs", "--n", "20000", "--window", str(window), "--reps", str(reps)])
    print("[bench] boson-scale: admission by queue size, RSS, the long drain ...", flush=True)
    result = run_driver("boson", exe, rest + ["--concurrency", str(SCALE_CONCURRENCY)], timeout=900)
    pairs = out["boson-scale"]
    out["boson-scale"] = next((r for r in (pairs, result) if "error" in r), {**result, **pairs})
    return out


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    pg = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip() if shutil.which("psql") else "?"
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs ({cpu}); "
            f"load avg {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}; {platform.platform()}; Python {platform.python_version()}; {pg}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes, one run (smoke test)")
    p.add_argument("--only", default=",".join(SYSTEMS), help="comma-separated systems")
    p.add_argument("--skip-scale", action="store_true", help="skip boson's scale and SQLite measurements")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--window", type=float, default=8.0, help="seconds each drain is measured for, at most")
    p.add_argument("--single-turns", type=int, default=5, help="turns of the one-at-a-time enqueue alone")
    a = p.parse_args()
    reps = 1 if a.quick else a.reps
    sizes = (["--n", "300", "--single", "30", "--wakeups", "3", "--window", "2"] if a.quick
             else ["--n", "20000", "--single", "1000", "--wakeups", "40", "--window", str(a.window)])
    small = {"django-q2": ["--n", "2000", "--wakeups", "15"], "django-tasks-db": ["--n", "3000", "--wakeups", "15"]}
    print("[bench] " + machine(), flush=True)
    summaries: dict[str, dict] = {}
    raw: dict[str, dict] = {}
    errors: dict[str, str] = {}  # name -> why: a failure, or "skipped (...)" (no Python >= 3.12)
    only = a.only.split(",")
    ready: dict[str, str] = {}
    for name in only:
        if name not in SYSTEMS:
            errors[name] = f"unknown system (known: {', '.join(SYSTEMS)})"
            print(f"[bench] {name}: FAILED {errors[name]}", flush=True)
            continue
        exe, why = venv_python(name)
        if exe is None:
            skipped = why == NO_PYTHON_312
            errors[name] = f"skipped ({why})" if skipped else why
            print(f"[bench] {name}: {'skipped' if skipped else 'FAILED'} ({why})", flush=True)
            continue
        ready[name] = exe
    # Round-robin: every system's first rep, then every system's second, ... The host's
    # speed drifts from minute to minute; measured in one block each, two systems a few
    # minutes apart carried that drift into their ratio (pgqueuer's best drain 14,342 to
    # 17,666 jobs/s within one run, 9,393 to 10,460 in the next).
    for rep in range(reps):
        for name, exe in ready.items():
            if name in errors:
                continue
            args = ["peers", *sizes, "--reps", "1"] + ([] if a.quick else small.get(name, []))
            print(f"[bench] {name}: running (rep {rep + 1} of {reps}) ...", flush=True)
            result = run_driver(name, exe, args, timeout=600)
            if "error" in result:
                errors[name] = result["error"]
                print(f"[bench] {name}: FAILED {result['error']}", flush=True)
                continue
            raw[name] = merged(raw.get(name), result)
            print(f"[bench] {name}: {json.dumps(summary(result))} ({result['seconds']}s)", flush=True)
    single_turns(ready, errors, raw, 1 if a.quick else a.single_turns, sizes[sizes.index("--single") + 1])
    for name in ready:
        if name in errors:
            continue
        summaries[name] = summary(raw[name])
        missing = empty({k: v for k, v in summaries[name].items() if k not in ("drain_best_config", "wake_polling")})
        if missing:
            errors[name] = "no numbers for " + ", ".join(missing)
            print(f"[bench] {name}: FAILED {errors[name]}", flush=True)
    print("\n" + table({k: v for k, v in summaries.items() if k not in errors}, errors))
    if "boson" in only and not a.skip_scale:
        exe, _ = venv_python("boson")
        if exe is None:
            errors["boson-scale"] = errors["boson-sqlite"] = "boson's virtualenv could not be installed"
        else:
            peer_exe = ready.get(SCALE_PEER) if SCALE_PEER not in errors else None
            raw["machine-scaling"] = machine_scaling.measure(0.2 if a.quick else 1.5, 1 if a.quick else reps)
            print("[bench] " + machine_scaling.summary_line(raw["machine-scaling"]), flush=True)
            raw.update(scale_in_turns(exe, peer_exe, a.quick, reps, a.window))
            parts = ["boson-scale", "boson-sqlite"] + ([f"{SCALE_PEER}-scale"] if peer_exe else [])
            sq_args = ["sqlite", "--n", "300" if a.quick else "20000", "--window", "2" if a.quick else str(a.window),
                       "--reps", str(reps)]
            raw["boson-sqlite"] = run_driver("boson", exe, sq_args, timeout=600)
            for part in parts:
                result = raw[part]
                values = ({} if "error" in result else
                          {k: (med(v) if isinstance(v, list) else v) for k, v in result.items()
                           if k != "seconds" and not k.startswith(PROFILE_PREFIX)})
                if "error" in result:
                    errors[part] = result["error"]
                elif not values or empty(values):
                    errors[part] = "no numbers for " + (", ".join(empty(values)) or "anything")
            failed = {k: errors[k] for k in parts if k in errors}
            if failed:
                print("\n" + "\n".join(f"[bench] {k}: FAILED {why}" for k, why in failed.items()))
            if not {"boson-scale", "boson-sqlite"} & set(failed):
                print("\n" + scale_table(raw["boson-scale"], raw["boson-sqlite"], raw.get(f"{SCALE_PEER}-scale")
                                          if f"{SCALE_PEER}-scale" not in failed else None, raw["machine-scaling"]))
    out = BENCH / "results"
    out.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (out / f"{stamp}.json").write_text(json.dumps({"machine": machine(), "raw": raw, "errors": errors}, indent=1))
    print(f"\n[bench] raw results: bench/results/{stamp}.json")
    failures = {k: why for k, why in errors.items() if not why.startswith("skipped")}
    for name, why in errors.items():
        print(f"[bench] FAILED: {name}: {why}" if name in failures else f"[bench] {name}: {why}")
    if a.quick:
        if failures:
            print(f"[bench] quick run FAILED: {', '.join(failures)}", flush=True)
            sys.exit(1)
        print("[bench] quick run ok: every driver that ran produced every measurement")


if __name__ == "__main__":
    main()
