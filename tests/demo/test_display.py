"""The live demo's screen fits the terminal: the admin's address, the login and the
counts always show; the running jobs and the latest events share what is left."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def display(example_on_path):
    from shop.demo import display

    return display


def _look(display, running: int):
    jobs = {f"j{n}": SimpleNamespace(id=f"j{n}", task="shop.tasks.make_thumbnail", queue="media", lease_holder="general-a-1")
            for n in range(running)}
    progress = {job_id: SimpleNamespace(current=2, total=4, message="1024px done") for job_id in jobs}
    grid = {queue: {"running": 1, "failed": 2} for queue in ("emails", "media", "partners", "reports", "risky", "maintenance")}
    return display.Look(grid=grid, running=jobs, progress=progress, paused=["reports"])


@pytest.mark.parametrize("rows", [24, 30, 60])
def test_the_frame_fits_the_terminal(display, rows):
    head = ["boson_django demo", "admin: http://127.0.0.1:8000/admin/   login: admin / pw", "until Ctrl-C", "paused"]
    events = [f"event {n}" for n in range(30)]
    lines = display.live_frame(head, _look(display, 10), events, "42 jobs trickled", rows).splitlines()
    assert len(lines) < rows  # the cursor's line is left
    assert lines[:4] == head and lines[-1] == "42 jobs trickled"
    assert sum("make_thumbnail" in line and "[######......] 2/4 1024px done" in line for line in lines) >= 1
    assert "  event 29" in lines  # the latest event
    assert sum(line.startswith("media") for line in lines) == 1


def test_a_tall_terminal_shows_every_running_job(display):
    frame = display.live_frame(["demo"], _look(display, 10), [], "footer", 80)
    assert frame.count("make_thumbnail") == 10


def test_the_log_line_counts_each_state_and_names_the_paused_queue(display):
    line = display.summary(_look(display, 2))
    assert "running 6 | waiting 0 | scheduled 0 | retrying 0 | failed 12 | quarantined 0" in line
    assert "paused: reports" in line and "progress: make_thumbnail 2/4, make_thumbnail 2/4" in line
