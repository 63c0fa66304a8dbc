"""Statements that find running jobs by id look them up by key, whatever the statistics say.

``boson_job`` indexes running jobs apart (the partial ``boson_job_lease``, and
``(task, state)``). A statement naming jobs by id that also says ``state = 'running'``
lets the planner take one of them when its statistics think few jobs are running (the
usual case: ANALYZE ran while the queue was idle), and then filter every running job
for the ids: a cost in running jobs, for some statements per id. Each test here builds
that situation (ANALYZE saw no running job, then 256 were claimed), runs the service,
checks what it did and EXPLAINs the statement it ran.

The test table is small, so a sequential scan is the cheapest plan for it; the plans are
read with sequential scans off, which asks the question that matters on a large table:
which index the planner would walk.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from boson_django import services
from boson_django.errors import LeaseRejected
from boson_django.models import Job, Run
from boson_django import drivers
from boson_django.services import AckRequest, AdmissionUnit, LeaseRef, Outcome
from boson_django.drivers.postgresql import claim as claim_pg
from tests.factories import ADD, NOOP, envelope

pytestmark = pytest.mark.postgres

RUNNING_INDEXES = ("boson_job_lease", "boson_job_task_state")
#: The run table's indexes that do not lead with the job: walking one to close runs by
#: job compares every open run with every (job, fence) pair.
NOT_BY_JOB = ("boson_run_started", "boson_run_task_started")
LEASE_MS = 60_000


@pytest.fixture
def running(live_clock) -> Iterator[list[AdmissionUnit]]:
    """256 running jobs (of 300) that the planner's statistics do not know about."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE boson_job SET (autovacuum_enabled = false)")  # keep the statistics stale
    try:
        services.enqueue([envelope(NOOP, queue="many") for _ in range(300)])
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE boson_job")  # the statistics see no running job
            cursor.execute("ANALYZE boson_run")  # ... and no open run
        units = services.admit("w1", ["many"], 256, lease_ms=LEASE_MS)
        assert len(units) == 256
        yield units
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE boson_job RESET (autovacuum_enabled)")


def ran(call: Callable[[], object], prefix: str) -> tuple[object, str]:
    """``call()``'s result and the one statement starting with ``prefix`` it ran."""
    with CaptureQueriesContext(connection) as seen:
        result = call()
    found = [q["sql"] for q in seen.captured_queries if q["sql"].startswith(prefix)]
    assert len(found) == 1, [q["sql"][:120] for q in seen.captured_queries]
    return result, found[0]


def plan(sql: str) -> str:
    """EXPLAIN of ``sql`` (as run, parameters inlined) with sequential scans off."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0][:300] for row in cursor.fetchall())


def assert_found_by_key(text: str) -> None:
    assert not any(index in text for index in RUNNING_INDEXES), text
    assert "Index Scan using boson_job_pkey on boson_job" in text, text


def test_a_lease_renewal_renews_exactly_the_held_leases_each_found_by_key(running, live_clock):
    held = [u.lease for u in running]
    expired, stolen = held[0], held[1]
    Job.objects.filter(id=expired.job_id).update(lease_expires_at=live_clock.now())  # expires now: not held
    Job.objects.filter(id=stolen.job_id).update(fence=stolen.fence + 1)  # re-claimed by another worker
    waiting = Job.objects.filter(queue="many", state="available").values_list("id", "fence").first()
    assert waiting is not None
    stale = LeaseRef(held[2].job_id, held[2].fence - 1)
    leases = [*held, stale, LeaseRef(*waiting), LeaseRef("no-such-job", 1)]
    live_clock.advance(1_000)

    lost, sql = ran(lambda: services.renew(leases, 2 * LEASE_MS), "UPDATE boson_job SET lease_expires_at")

    assert sorted(lost) == sorted([expired.job_id, stolen.job_id, stale.job_id, waiting[0], "no-such-job"])
    renewed_until = live_clock.now() + timedelta(milliseconds=2 * LEASE_MS)
    expiry = dict(Job.objects.filter(queue="many").values_list("id", "lease_expires_at"))
    assert all(expiry[lease.job_id] == renewed_until for lease in held[2:])
    assert expiry[expired.job_id] < renewed_until and expiry[stolen.job_id] < renewed_until
    assert expiry[waiting[0]] is None
    # One statement renews the whole heartbeat: through the running jobs' partial index it
    # compared every running job with every lease.
    assert_found_by_key(plan(sql))


def test_a_general_ack_batch_completes_each_job_by_key(running):
    # A weight correction on a job without a rate class: the general path's batched completion.
    requests = [AckRequest(u.lease, Outcome.SUCCESS, actual_weight=0.5) for u in running]

    replies, sql = ran(lambda: services.ack_many(requests), "UPDATE boson_job SET state = 'completed'")

    assert [r.state for r in replies] == ["completed"] * 256
    assert Job.objects.filter(queue="many", state="completed").count() == 256
    assert_found_by_key(plan(sql))


def test_a_reclaim_moves_each_expired_job_by_key(running, live_clock):
    live_clock.advance(LEASE_MS + 1)

    reclaimed, sql = ran(lambda: services.reclaim_expired(), "UPDATE boson_job SET state = 'available'")

    assert sorted(r.job_id for r in reclaimed) == sorted(u.lease.job_id for u in running)
    assert Job.objects.filter(queue="many", state="available", crash_attempt=1).count() == 256
    assert not Job.objects.filter(queue="many", state="running").exists()
    assert_found_by_key(plan(sql))


def test_a_fenced_write_finds_its_job_by_key(running):
    lease = running[7].lease

    _, sql = ran(lambda: services.checkpoint(lease, {"step": 1}), "SELECT \"boson_job\"")

    assert Job.objects.get(id=lease.job_id).checkpoint == {"step": 1}
    with pytest.raises(LeaseRejected, match="stale"):
        services.checkpoint(LeaseRef(lease.job_id, lease.fence - 1), {"step": 2})
    assert Job.objects.get(id=lease.job_id).checkpoint == {"step": 1}
    assert_found_by_key(plan(sql))


def assert_runs_found_by_job(text: str) -> None:
    assert not any(index in text for index in NOT_BY_JOB), text
    assert "boson_run_job_fence" in text, text


def test_a_general_ack_batch_closes_each_run_by_its_job(running):
    requests = [AckRequest(u.lease, Outcome.SUCCESS, actual_weight=0.5) for u in running]

    _, sql = ran(lambda: services.ack_many(requests), "UPDATE boson_run SET finished_at")

    assert not Run.objects.filter(job__queue="many", finished_at__isnull=True).exists()
    assert Run.objects.filter(job__queue="many", outcome="success").count() == 256
    assert_runs_found_by_job(plan(sql))


def test_a_reclaim_closes_each_run_by_its_job(running, live_clock):
    live_clock.advance(LEASE_MS + 1)

    _, sql = ran(lambda: services.reclaim_expired(), "UPDATE boson_run SET finished_at")

    assert not Run.objects.filter(job__queue="many", finished_at__isnull=True).exists()
    assert Run.objects.filter(job__queue="many", recorded=True).count() == 256
    assert_runs_found_by_job(plan(sql))


AVAILABLE_INDEXES = ("boson_job_claim", "boson_job_wait")


def test_the_general_admission_claims_its_picks_by_key(live_clock):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE boson_job SET (autovacuum_enabled = false)")
    try:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE boson_job")  # the statistics see no available job
        services.set_task_config(ADD, max_active=1_000)  # a cap: the general path admits
        services.enqueue([envelope(ADD, queue="capped", args=[i, 1]) for i in range(300)])

        units, sql = ran(lambda: services.admit("w1", ["capped"], 100), "UPDATE boson_job SET state = 'running'")

        assert len(units) == 100
        assert Job.objects.filter(queue="capped", state="running").count() == 100
        text = plan(sql)
        assert not any(index in text for index in AVAILABLE_INDEXES), text
        assert "Index Scan using boson_job_pkey on boson_job" in text, text
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE boson_job RESET (autovacuum_enabled)")


def test_the_claims_generic_plan_probes_each_jobs_runs_by_key_when_planned_against_no_runs(live_clock):
    """The prepared claim's generic plan is kept for the life of the worker's connection.
    Made while the run table was empty (a new store), its first-run check must still be a
    probe by job, or each claim reads every run stored since (a drain slowed 5x)."""
    services.enqueue([envelope(NOOP, queue="fresh") for _ in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE boson_run")  # the statistics: no run at all
        cursor.execute("ANALYZE boson_job")
    parts = claim_pg.claim_sql(0).split("%s")
    numbered = "".join(part + (f"${i + 1}" if i < len(parts) - 1 else "") for i, part in enumerate(parts))
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in claim_pg.planner(0):  # the generic plan, as the worker runs it
            cursor.execute(f"SET LOCAL {setting}")
        cursor.execute(f"PREPARE boson_test_claim(int, text, int, text) AS {numbered}")
        try:
            cursor.execute("EXPLAIN EXECUTE boson_test_claim(64, 'w1', NULL, 'w1')")
            text = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE boson_test_claim")
    assert "Seq Scan on boson_run" not in text, text
    assert "Index Only Scan using boson_run_job_fence on boson_run r" in text, text
    assert "Index Cond: (job_id = (j_1.id)::text)" in text, text  # per job, not a hashed read of all
    assert "JIT:" not in text, text  # the disabled scans' cost penalty must not switch on compilation


def _prepared(marker: str) -> tuple[str, int, int]:
    """The name of this session's prepared statement containing ``marker``, and its
    generic and custom plan counts."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{marker}%"],
        )
        (found,) = cursor.fetchall()
    return found


CLAIM_MARKER = "INSERT INTO boson_run (job_id, task, queue, attempt"
ACK_MARKER = "UPDATE boson_job j SET state = 'completed'"


@pytest.mark.parametrize("statistics", ["never analyzed", "analyzed while empty"])
def test_the_claim_of_every_queue_keeps_one_generic_plan_that_walks_the_claim_index(live_clock, statistics):
    """Planning the claim on every call cost the server as much as running a claim of ten,
    so the worker's claim of every queue keeps its generic plan for the connection's life.
    That plan is made at the worker's first claim, often against an empty queue, and must
    still walk the claim index and find the claimed jobs by key once jobs pile up -- here
    behind 600 jobs of a busier queue with a higher priority."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE boson_job SET (autovacuum_enabled = false)")
        if statistics == "analyzed while empty":
            cursor.execute("ANALYZE boson_job")
            cursor.execute("ANALYZE boson_run")
    drivers.dedicate(connection)  # as the worker loop's connection: the settings hold for the session
    try:
        assert services.admit("w1", [], 10) == []  # the plan is made now, against no job
        services.enqueue([envelope(NOOP, queue="busy", priority=5) for _ in range(600)])
        services.enqueue([envelope(NOOP, queue="fresh") for _ in range(600)])
        claimed = [u.lease.job_id for _ in range(8) for u in services.admit("w1", [], 10)]

        expected = Job.objects.filter(queue="busy").order_by("run_at", "id").values_list("id", flat=True)[:80]
        assert claimed == list(expected)  # claim order held
        name, generic, custom = _prepared(CLAIM_MARKER)
        assert (generic, custom) == (9, 0)
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN EXECUTE {name}(10, 'w1', NULL, 'w1')")
            text = "\n".join(row[0] for row in cursor.fetchall())
    finally:
        drivers.undedicate(connection)
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE boson_job RESET (autovacuum_enabled)")
    assert "Index Scan using boson_job_claim on boson_job j" in text, text
    assert "Sort" not in text and "Join Filter" not in text, text
    assert "Index Cond: ((id)::text = ANY" in text, text  # the claimed jobs, by key


def test_a_claim_of_named_queues_is_planned_for_its_call():
    """Its generic plan would walk the claim index past every other queue's jobs."""
    assert "plan_cache_mode = force_generic_plan" not in claim_pg.planner(1)
    assert set(claim_pg._PLANNER) < set(claim_pg.planner(0))


def test_the_ack_flushs_plan_finds_each_job_and_run_by_key_when_planned_against_no_runs(live_clock):
    """The ack flush's prepared statement switches to a generic plan after a few calls and
    keeps it until the next ANALYZE. Made while the run table looked empty, it read the
    whole run table on each flush (a drain at concurrency 10 slowed fourfold as runs
    piled up); it must find the jobs and their runs by key."""
    services.enqueue([envelope(NOOP, queue="acks") for _ in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE boson_run SET (autovacuum_enabled = false)")
        cursor.execute("ANALYZE boson_run")  # the statistics: no run at all
        cursor.execute("ANALYZE boson_job")
    drivers.dedicate(connection)  # as the ack thread's connection
    try:
        for _ in range(8):
            units = services.admit("w1", ["acks"], 10)
            replies = services.ack_many([AckRequest(u.lease, Outcome.SUCCESS) for u in units])
            assert [r.state for r in replies] == ["completed"] * 10
        name, generic, _ = _prepared(ACK_MARKER)
        assert generic > 0  # what is EXPLAINed below is the plan the flushes run
        units = services.admit("w1", ["acks"], 10)
        acks = json.dumps([[u.lease.job_id, u.lease.fence, None] for u in units])
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN EXECUTE {name}(%s::jsonb, 1000, 0)", [acks])
            text = "\n".join(row[0] for row in cursor.fetchall())
    finally:
        drivers.undedicate(connection)
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE boson_run RESET (autovacuum_enabled)")
    assert "Seq Scan on boson_run" not in text and "Seq Scan on boson_job" not in text, text
    assert "Index Scan using boson_run_pkey on boson_run r " in text and "Index Cond: (id = ANY" in text, text
    assert "Index Cond: ((id)::text = ANY" in text, text  # the completed jobs, by key
    assert "JIT:" not in text, text


@pytest.mark.parametrize("service", ["admit", "ack_many"])
def test_a_hot_statement_inside_the_callers_transaction_plans_as_alone_and_leaves_the_callers_settings(live_clock, service):
    """Called inside ``transaction.atomic()``, the claim and the ack flush join the caller's
    transaction: their planner settings must hold for them (a claim of ten took 5-8 ms
    instead of ~1.2 ms without them, planned for a small table's statistics) and end with
    them (the caller's own queries keep the caller's settings). The plan as run is read
    from ``auto_explain``, sent to this client as a notice."""
    services.enqueue([envelope(NOOP, queue="fresh") for _ in range(300)])
    units = services.admit("w1", [], 10)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE boson_job")
        cursor.execute("ANALYZE boson_run")  # small tables: a sequential scan looks cheapest
    marker = CLAIM_MARKER if service == "admit" else ACK_MARKER
    notices: list[str] = []
    settings = "SELECT current_setting('enable_seqscan'), current_setting('jit'), current_setting('plan_cache_mode')"
    with transaction.atomic():
        raw = connection.connection

        def heard(notice) -> None:
            notices.append(notice.message_primary or "")

        raw.add_notice_handler(heard)
        with connection.cursor() as cursor:
            cursor.execute("LOAD 'auto_explain'")
            cursor.execute("SET LOCAL auto_explain.log_min_duration = 0")
            cursor.execute("SET LOCAL auto_explain.log_level = 'notice'")
            cursor.execute(settings)
            callers = cursor.fetchone()
        if service == "admit":
            assert len(services.admit("w1", [], 10)) == 10
        else:
            replies = services.ack_many([AckRequest(u.lease, Outcome.SUCCESS) for u in units])
            assert all(reply.error is None for reply in replies)
        with connection.cursor() as cursor:
            cursor.execute(settings)
            after = cursor.fetchone()
        raw.remove_notice_handler(heard)
    (ran,) = [text for text in notices if marker in text]
    assert "Seq Scan on boson_job" not in ran and "Seq Scan on boson_run" not in ran, ran
    assert after == callers == ("on", "on", "auto")  # the caller's settings, before and after


def _cap_probes(queue: str, limit: int) -> tuple[int, int]:
    """Jobs one claim of ``queue`` took, and the index scans of the task caps it made."""

    def scans() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'boson_task_config'")
            return cursor.fetchone()[0]

    with transaction.atomic():
        before = scans()
        units = services.admit("w1", [queue], limit)
        return len(units), scans() - before


def test_the_claim_probes_each_candidates_task_cap_only_when_some_task_has_one(live_clock):
    """The claim judges each candidate as its walk meets it, below the row locks: for the
    rows other admitters hold and it skips too. With no task capped it makes no probe per
    row; with one capped it probes each candidate, and jobs of uncapped tasks stay free."""
    services.enqueue([envelope(NOOP, queue="caps") for _ in range(20)])
    taken, probes = _cap_probes("caps", 5)
    assert taken == 5 and probes <= 1, probes
    services.set_task_config(ADD, max_active=1)
    taken, probes = _cap_probes("caps", 5)
    assert taken == 5 and probes >= 5, probes
