"""The demo's non-interactive mode, end to end: ``manage.py boson_demo --drain`` in the
example project, with real worker processes, on the store this suite runs against.

The command itself asserts where every job ended (completed; retried then completed;
rate-limited then completed; failed at once, or after its attempts; resumed after a
kill; deduplicated; quarantined) and exits non-zero otherwise. On PostgreSQL it uses its
own database, dropped afterwards (tests/demo/conftest.py).
"""

from __future__ import annotations

import os
import pathlib

import pytest


@pytest.mark.slow
def test_demo_drains_every_job_to_its_expected_end(demo):
    done = demo.run("--drain", "--timeout", "120", timeout=240)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{demo.logs_tail()}"
    assert "every demo job ended where it should" in done.stdout
    for group in ("emails", "email bounced", "partner flaky", "partner 429", "partner down", "report", "search index",
                  "poison feed"):
        assert f"ok   {group}" in done.stdout, done.stdout


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_killed_demo_stops_its_workers_and_server(demo):
    """``kill`` (SIGTERM) of the interactive demo ends its workers and its server too, as
    Ctrl-C does: they run in sessions of their own, so nothing else would."""
    import signal
    import time

    process = demo.popen("--port", "8765")
    try:
        lines = []
        for line in process.stdout:  # the header comes once the server is started
            lines.append(line)
            if "until Ctrl-C" in line:
                break
        children = _children_of(process.pid)
        assert len(children) >= 5, "".join(lines)  # the demo's workers and its server

        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in children if _alive(pid)]
    for pid in left:  # a failed run leaves no orphans behind
        os.kill(pid, signal.SIGKILL)
    assert not left, out
    assert "stopping workers and the server" in out
