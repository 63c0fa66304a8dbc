"""bench/run.py takes each system's reps in turns, one driver call per rep, and merges
them: what the table reports must be the medians over all the reps."""

from __future__ import annotations

import importlib.util
import os
import statistics
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "bench" / "run.py"


def _run_module():
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rep(bulk: float, drain: float, p50: float, p95: float, polling: bool = False) -> dict:
    wakeup = {"p50_ms": p50, "p95_ms": p95, "n": 40, **({"polling": True} if polling else {})}
    return {"bulk": [bulk], "single": [bulk / 10], "drain": [drain], "drain_c1024": [drain * 3],
            "wakeup": wakeup, "seconds": 10.0}


def test_reps_merge_into_medians_over_all_of_them():
    run = _run_module()
    merged = None
    for r in (rep(100, 10, 1.0, 2.0), rep(300, 30, 3.0, 9.0), rep(200, 20, 2.0, 4.0)):
        merged = run.merged(merged, r)

    assert merged["bulk"] == [100, 300, 200] and merged["drain_c1024"] == [30, 90, 60]
    assert merged["seconds"] == 30.0
    assert merged["wakeup"] == {"p50_ms": 2.0, "p95_ms": 4.0, "n": 120}
    summary = run.summary(merged)
    assert summary["bulk"] == 200 and summary["drain_default"] == 20
    assert summary["drain_best"] == 60 and summary["drain_best_config"] == "drain_c1024"
    assert (summary["wake_p50"], summary["wake_p95"], summary["wake_polling"]) == (2.0, 4.0, False)


def test_a_polling_systems_flag_survives_the_merge():
    run = _run_module()
    merged = run.merged(run.merged(None, rep(1, 1, 50.0, 90.0, polling=True)), rep(1, 1, 70.0, 110.0, polling=True))
    assert merged["wakeup"]["polling"] is True
    assert run.summary(merged)["wake_p50"] == 60.0


def test_the_scale_rows_say_how_much_four_processes_could_gain_from_the_cpu_measured():
    run = _run_module()
    cores = os.cpu_count() or 1
    one = [{"cores_busy": 1.0, "us_per_job": 100.0, "database": 0.3, "workers": 0.2, "idle": 0.5, "jobs": 10},
           {}, {"cores_busy": 1.2, "us_per_job": 120.0, "database": 0.4, "workers": 0.2, "idle": 0.4, "jobs": 10}]
    four = [{"cores_busy": 1.9, "us_per_job": 110.0, "database": 0.6, "workers": 0.35, "idle": 0.05, "jobs": 10}]
    row = run.cpu_row(one, four)  # a rep too short for its two snapshots (``{}``) is left out
    assert "cores busy 1.10 / 1.90" in row and "110 / 110 us per job" in row
    assert f"four can gain at most {cores / 1.1:.2f}x" in row
    assert run.cpu_row(None, four).endswith("four can gain at most — |")  # one process not measured


def test_the_scale_table_puts_the_peers_four_processes_beside_boson():
    run = _run_module()
    cpu = {"cores_busy": 1.5, "us_per_job": 100.0, "database": 0.4, "workers": 0.3, "idle": 0.25, "jobs": 10}
    boson = {"admit_ms_10000": [1.0], "admit_ms_1000000": [1.2], "drain_1proc": [100.0], "drain_4proc": [110.0],
             "drain_1proc_default": [50.0], "drain_4proc_default": [60.0], "rss_mb_c32": 50.0,
             "long_first_fifth": 10.0, "long_last_fifth": 9.0}
    peer = {"drain_1proc": [40.0, 20.0, 30.0], "drain_4proc": [36.0, 45.0, 60.0], "cpu_1proc": [cpu], "cpu_4proc": [cpu]}
    table = run.scale_table(boson, {"drain": [2000.0]}, peer)
    rows = table.splitlines()
    peer_rows = [r for r in rows if "pgqueuer's default batch (10)" in r]
    assert len(peer_rows) == 2
    assert "30.0 jobs/s" in peer_rows[0] and "45.0 jobs/s" in peer_rows[1] and "the peer's: 1.500x" in peer_rows[1]
    assert rows[rows.index(peer_rows[1]) + 1].startswith("| CPU mid-drain, 1 process / 4: cores busy 1.50 / 1.50")
    assert ">= 1.5x: 1.100x" in table and ">= 1.5x: 1.200x" in table  # boson's own rows unchanged
    assert "pgqueuer" not in run.scale_table(boson, {"drain": [2000.0]})


def test_boson_and_the_peer_take_the_scale_pairs_in_turns(monkeypatch):
    run = _run_module()
    calls: list[tuple[str, str]] = []

    def driver(name, exe, args, timeout):
        calls.append((name, args[0]))
        if args[0] == "scale-but-pairs":
            return {"admit_ms_10000": [1.0], "rss_mb_c32": 50.0, "seconds": 5.0}
        rate = 100.0 * len(calls)
        return {"drain_1proc": [rate], "drain_4proc": [rate * 1.5], "cpu_1proc": [{}], "cpu_4proc": [{}],
                "seconds": 1.0}

    monkeypatch.setattr(run, "run_driver", driver)
    out = run.scale_in_turns("boson-python", "peer-python", quick=True, reps=3, window=2.0)

    pair = [("boson", "scale-pairs"), (run.SCALE_PEER, "scale")]
    assert calls == pair * 3 + [("boson", "scale-but-pairs")]
    assert out["boson-scale"]["drain_1proc"] == [100.0, 300.0, 500.0]
    assert out[f"{run.SCALE_PEER}-scale"]["drain_4proc"] == [300.0, 600.0, 900.0]
    assert out["boson-scale"]["admit_ms_10000"] == [1.0] and out["boson-scale"]["rss_mb_c32"] == 50.0


def test_a_failed_scale_rep_is_reported_and_not_run_again(monkeypatch):
    run = _run_module()
    calls: list[str] = []

    def driver(name, exe, args, timeout):
        calls.append(name)
        if name == "boson" and args[0] == "scale-pairs":
            return {"error": "exit 1: boom"}
        return {"drain_1proc": [1.0], "drain_4proc": [1.0], "seconds": 1.0}

    monkeypatch.setattr(run, "run_driver", driver)
    out = run.scale_in_turns("boson-python", None, quick=True, reps=2, window=2.0)

    assert calls == ["boson", "boson"]  # the failed pairs once, then the rest; no peer given
    assert out == {"boson-scale": {"error": "exit 1: boom"}}


@pytest.mark.slow
def test_the_machines_own_scaling_is_measured_with_no_database_and_shown_beside_the_ratios():
    run = _run_module()
    result = run.machine_scaling.measure(seconds=0.05, rounds=2)
    assert set(result["rounds"]) == {"2", "4"} and all(len(v) == 2 for v in result["rounds"].values())
    # several processes at once get some work done; one alone is the unit
    assert all(r > 0 for v in result["rounds"].values() for r in v)
    assert result["median"] == {k: statistics.median(v) for k, v in result["rounds"].items()}
    assert "2 / 4 busy processes do" in run.machine_scaling.summary_line(result)

    boson = {"admit_ms_10000": [1.0], "admit_ms_1000000": [1.2], "drain_1proc": [100.0], "drain_4proc": [110.0],
             "rss_mb_c32": 50.0}
    machine = {"rounds": {"2": [1.9], "4": [1.6, 1.8, 1.7]}, "median": {"2": 1.9, "4": 1.7}}
    rows = run.scale_table(boson, {"drain": [2000.0]}, None, machine).splitlines()
    row = next(r for r in rows if r.startswith("| the machine alone"))
    assert "| 1.70x (rounds 1.60x, 1.80x, 1.70x) |" in row
    assert not any(r.startswith("| the machine alone") for r in run.scale_table(boson, {"drain": [2000.0]}).splitlines())
