"""The fault harness itself: a worker that does not exit when waited for is reported with
where each of its threads was, so that a hang seen once in CI can be read, not guessed."""

from __future__ import annotations

import pytest


def test_a_worker_that_does_not_exit_is_reported_with_its_threads_stacks(live_clock, workers):
    worker = workers("stuck")
    worker.wait_for_line("up (queues=")

    with pytest.raises(AssertionError) as failure:
        worker.exit_code(timeout=0.5)  # never told to stop: it idles on

    report = str(failure.value)
    assert report.startswith("stuck did not exit within 0 s:")  # 0.5 s, rounded
    assert "Thread 0x" in report and "(most recent call first):" in report and "boson_django" in report
    assert worker.popen.poll() is not None  # and it is gone
