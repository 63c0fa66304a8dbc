"""What a worker's log says: a task's error text cannot forge or recolour its lines, and
a chatty handler's stored log says how many lines it left out. (The lines of an outage
are in tests/faults/test_network.py.)"""

from __future__ import annotations

import re

from boson_django import services
from boson_django.models import Run
from tests.faults.support import wait_until
from tests.testapp import fault_tasks, tasks  # noqa: F401 -- registers the tasks in this process

HOSTILE = "\x1b[2J\x1b[31mall clear\r2030-01-01 00:00:00,000 INFO boson: forged\u202e\x07\nsecond line"


def test_control_characters_and_ansi_escapes_in_a_tasks_error_are_escaped_in_the_log(live_clock, workers):
    result = tasks.fail.enqueue(HOSTILE)
    worker = workers("w-hostile", "--burst")
    assert worker.exit_code() == 0, worker.text()
    text = worker.text()
    line = next(line for line in text.splitlines() if result.id in line and "retryable" in line)
    assert line.endswith("ValueError: \\x1b[2J\\x1b[31mall clear\\r2030-01-01 00:00:00,000 INFO boson: forged\\u202e\\x07"
                         " second line"), line
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text and "\x07" not in text
    assert "INFO boson: forged" not in text.replace("\\r2030-01-01 00:00:00,000 INFO boson: forged", "")
    assert services.errors(result.id)[-1].error.count("\x1b") >= 2  # the stored error keeps what was raised


def test_the_dropped_lines_marker_counts_every_line_left_out(live_clock, workers):
    """The capture keeps a handler's newest 200 lines and says how many it dropped; the
    store then keeps what fits in 64,000 characters. Its marker counted only the lines it
    dropped itself (185 where 2,984 were dropped): the capture's marker was one of them."""
    logged = 3_184
    result = fault_tasks.chatty.enqueue(logged)
    worker = workers("w-chatty", "--burst")
    assert worker.exit_code() == 0, worker.text()
    wait_until(lambda: services.job_state(result.id)[1] == "completed", what="the job")
    logs = Run.objects.get(job_id=result.id).logs
    found = re.fullmatch(r"\[(\d+) earlier log lines dropped\]", logs[0])
    assert found, logs[:2]
    kept = logs[1:]
    assert int(found.group(1)) + len(kept) == logged, (found.group(0), len(kept))
    assert kept[-1].split("line ")[1].startswith(f"{logged - 1:06d}")  # the newest are the ones kept
    assert 0 < len(kept) < 200
