"""The live demo, end to end: soon after the admin URL appears, the store holds running
jobs with progress, jobs that failed for good, a quarantined job, scheduled and retrying
jobs and a paused queue; the log mode says what the demo does and shows each of those
in its lines of counts; Ctrl-C (SIGINT) stops it, workers and server included."""

from __future__ import annotations

import re
import signal

import pytest

#: What the log's lines of counts must each show at least once, as a pattern.
SHOWN = {
    "a running job with progress": r"running [1-9].* progress: make_thumbnail \d/4",
    "failed jobs": r"\| failed [1-9]",
    "a quarantined job": r"\| quarantined [1-9]",
    "scheduled jobs": r"\| scheduled [1-9]",
    "retrying jobs": r"\| retrying [1-9]",
    "the paused queue": r"\| paused: reports",
}
#: What the log says once, at the start.
SAID = ["admin: http://127.0.0.1:", "login: admin / ", "until Ctrl-C", 'Queue "reports" starts paused',
        "this is the demo's log mode", "worker processes"]


@pytest.mark.slow
def test_the_live_demo_shows_every_kind_of_job_before_ctrl_c(demo):
    # The demo's own limit is only a backstop: on a quiet machine every kind shows within
    # about 20 s, on a loaded one it took up to a minute, and a demo that ended on its own
    # before the test's Ctrl-C could not show that Ctrl-C stops it.
    process = demo.popen("--port", "8775", "--timeout", "180")
    lines, missing = [], set(SHOWN)
    try:
        for line in process.stdout:  # ends by itself after --timeout
            lines.append(line)
            if line.startswith("["):  # a line of counts
                missing -= {what for what, pattern in SHOWN.items() if re.search(pattern, line)}
            if not missing:
                break
        process.send_signal(signal.SIGINT)  # Ctrl-C
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = "".join(lines) + rest
    assert not missing, f"never shown: {sorted(missing)}\n{log}\n{demo.logs_tail()}"
    assert process.returncode == 0, log
    assert "stopping workers and the server" in rest
    for said in SAID:
        assert said in log, log
    # the store agrees with the log
    states = dict(demo.query("SELECT state, COUNT(*) FROM boson_job GROUP BY state"))
    assert states.get("failed", 0) >= 1 and states.get("quarantined", 0) >= 1, states
    assert [bool(paused) for (paused,) in demo.query("SELECT paused FROM boson_queue WHERE name = 'reports'")] == [True]
    errors = {error.splitlines()[0] for (error,) in demo.query("SELECT last_error FROM boson_job WHERE state = 'failed'")}
    assert any("550 5.1.1" in error for error in errors), errors
