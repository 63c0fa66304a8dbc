"""The seeded chaos run, short: random SIGKILLs (and, on PostgreSQL, connection kills)
against 4 worker processes; every job completes with exactly one effect and the checker
stays clean. ``bench/chaos.py`` runs the 60-second, 2,000-job version."""

from __future__ import annotations

import pytest

from boson_django import clock
from tests.faults.support import SEED
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process


@pytest.mark.slow
def test_a_short_chaos_run_loses_nothing_and_doubles_nothing(transactional_db, tmp_path):
    from bench.chaos import run

    clock.unfreeze()  # wall-clock chaos: leases lapse for real after a kill
    figures = run(seconds=12, jobs=300, workers=4, seed=SEED, folder=str(tmp_path), drain_s=120)
    print("\n".join(figures.lines()))
    assert figures.kills + figures.connection_kills > 0
    assert figures.problems == [], "\n".join(figures.lines())
