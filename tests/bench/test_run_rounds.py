"""bench/run.py takes each system's reps in turns, one driver call per rep, and merges
them: what the table reports must be the medians over all the reps."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
