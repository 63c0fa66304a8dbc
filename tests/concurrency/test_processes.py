"""Real worker processes on one store, and the store clock seen from another process."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from boson_django import clock, services
from tests.concurrency.support import assert_each_admitted_once, start_python
from tests.conftest import EPOCH
from tests.factories import NOOP, envelope

PROCESSES = 4
JOBS = 400

DRAIN = """
import json, sys
from boson_django import services
from boson_django.models import Job

worker, queue = sys.argv[1], sys.argv[2]
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"
got = []
while True:
    units = services.admit(worker, [queue], 10)
    for unit in units:
        sum(range(20_000))  # the handler's work, outside any transaction
        services.ack(unit.lease, services.Outcome.SUCCESS)
    got += [unit.lease.job_id for unit in units]
    if not units and not Job.objects.filter(queue=queue, state="available").exists():
        break
print(json.dumps(got), flush=True)
"""

READ_CLOCK = """
import sys
from boson_django import clock
for line in sys.stdin:
    print(clock.now().isoformat(), flush=True)
"""


@pytest.mark.slow
def test_worker_processes_drain_one_store_each_job_exactly_once(live_clock):
    """On SQLite: one file, several processes, no 'database is locked' escaping."""
    job_ids = [r.id for r in services.enqueue([envelope(NOOP, queue="procs") for _ in range(JOBS)])]
    procs = [start_python(DRAIN, [f"proc-{i}", "procs"], stdin=-1) for i in range(PROCESSES)]
    try:
        for proc in procs:  # a start gate: every process set up before any admits
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()

    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert "locked" not in err.lower(), err
    got = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    flat = [job_id for mine in got for job_id in mine]
    assert len(flat) == len(set(flat)) == JOBS, "a job was admitted by two processes"
    assert set(flat) == set(job_ids)
    assert sum(1 for mine in got if mine) >= 2, ("the processes did not overlap", [len(m) for m in got])
    assert services.counts("procs")["completed"] == JOBS
    assert_each_admitted_once(job_ids, fence=1)


def test_frozen_advanced_and_unfrozen_clock_is_seen_by_another_process(live_clock):
    reader = start_python(READ_CLOCK, stdin=-1)

    def their_now() -> datetime:
        reader.stdin.write("now?\n")
        reader.stdin.flush()
        return datetime.fromisoformat(reader.stdout.readline().strip())

    try:
        assert their_now() == EPOCH
        clock.advance(1_500)
        assert their_now() == EPOCH + timedelta(milliseconds=1_500)
        clock.freeze(datetime(2031, 6, 1, 12, tzinfo=timezone.utc))
        assert their_now() == datetime(2031, 6, 1, 12, tzinfo=timezone.utc)
        clock.unfreeze()
        theirs, ours = their_now(), clock.now()
        assert abs((ours - theirs).total_seconds()) < 60, (ours, theirs)
        assert theirs.year < 2030, "unfrozen: back to the real clock"
        clock.advance(3_600_000)
        theirs = their_now()
        assert 3_540 < (theirs - ours).total_seconds() < 3_660, "an offset on a running clock is shared too"
    finally:
        reader.stdin.close()
        reader.wait(30)
    assert reader.returncode == 0, reader.stderr.read()
