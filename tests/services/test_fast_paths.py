"""The PostgreSQL fast paths of ``admit`` (``claim_pg``) and ``ack_many`` (``ack_pg``).

Each fast path is one statement that short-cuts a general path; these tests pin it down
with real rows on a real server, no mocks:

* differential: the same scenario run through the fast path and through the general path
  (``admission._admit``, ``ack_batch._ack_general``, single ``ack`` calls) leaves the same
  job rows, runs, results and throughput counters -- and those match the definitions, so
  both paths cannot be wrong together;
* which path ran is read from the SQL Django executed: the fast statements go through
  psycopg directly, the general paths through Django's cursor;
* refusals write nothing, a caller's rolled-back transaction keeps nothing, concurrent
  admitters claim each job once, and stale planner statistics do not change the claim.

Most tests run twice: ``joined`` (inside pytest-django's transaction: the fast statement
joins the caller's transaction) and ``own`` (committed for real: the fast statement is
its own pipelined transaction with its planner settings, as a worker calls it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from boson_django import services
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django.models import Bucket, Job, JobData, Run, ThroughputMinute
from boson_django.services import AckReply, AckRequest, AdmissionUnit, LeaseRef, Outcome, ack_batch, admission
from boson_django.drivers.postgresql import claim as claim_pg
from tests.concurrency.support import assert_each_admitted_once, run_threads
from tests.conftest import EPOCH
from tests.factories import ADD, EPHEMERAL, NOOP, admit_one, enqueue_one, envelope, state_of

pytestmark = pytest.mark.postgres

LONG_LEASE_MS = 600_000
#: The acks of the differential tests: a later store-clock minute than the claims.
ACK_AT = EPOCH + timedelta(seconds=90, microseconds=250)


@pytest.fixture(
    params=[
        pytest.param("joined", marks=pytest.mark.django_db),
        pytest.param("own", marks=pytest.mark.django_db(transaction=True)),
    ]
)
def clk(request):
    """The frozen store clock; ``joined``: the test runs inside one transaction that the
    fast statements join; ``own``: every service call commits on its own. (The marks tell
    pytest-django, before any test runs, that these tests need the test database.)"""
    return request.getfixturevalue("store_clock" if request.param == "joined" else "live_clock")


# -- which path ran: the SQL Django executed (the fast statements bypass its cursor) ----


@contextmanager
def django_sql() -> Iterator[CaptureQueriesContext]:
    with CaptureQueriesContext(connection) as seen:
        yield seen


def job_sql(seen: CaptureQueriesContext) -> list[str]:
    """Statements Django ran on the job table (the general paths lock and update it)."""
    return [q["sql"] for q in seen.captured_queries if re.search(r"\bboson_job\b", q["sql"])]


def general_claim_ids(seen: CaptureQueriesContext, candidates: Sequence[str]) -> set[str]:
    """Which of ``candidates`` the general admission path's claiming UPDATE named."""
    updates = [s for s in job_sql(seen) if s.startswith("UPDATE boson_job SET state = 'running'")]
    return {job_id for job_id in candidates for s in updates if f"'{job_id}'" in s}


def general_ack_ids(seen: CaptureQueriesContext, candidates: Sequence[str]) -> set[str]:
    """Which of ``candidates`` the general ack path locked."""
    locks = [s for s in job_sql(seen) if "FOR UPDATE" in s]
    return {job_id for job_id in candidates for s in locks if f"'{job_id}'" in s}


# -- what a path leaves behind ------------------------------------------------------------


def _without(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in keys}


def counters(queue: str) -> dict[tuple[datetime, str, int], int]:
    """Throughput counters of ``queue`` summed over shards: (minute, outcome, wait bucket) -> n."""
    totals: Counter[tuple[datetime, str, int]] = Counter()
    for row in ThroughputMinute.objects.filter(queue=queue).values("minute", "outcome", "wait_bucket", "count"):
        totals[(row["minute"], row["outcome"], row["wait_bucket"])] += row["count"]
    return dict(totals)


def world(queue: str) -> dict[str, Any]:
    """The rows of ``queue``'s jobs (by their ``args``), ids and queue names left out."""
    jobs = sorted(Job.objects.filter(queue=queue).values(), key=lambda r: r["args"])
    ids = [j["id"] for j in jobs]
    return {
        "jobs": [_without(j, "id", "queue", "fingerprint") for j in jobs],
        "runs": [
            [_without(r, "id", "job_id", "queue") for r in Run.objects.filter(job_id=i).order_by("id").values()]
            for i in ids
        ],
        "results": [
            [_without(d, "id", "job_id") for d in JobData.objects.filter(job_id=i, kind="result").values()]
            for i in ids
        ],
        "counters": counters(queue),
    }


def everything() -> dict[str, Any]:
    """Every row a claim or an ack could touch."""
    return {
        "jobs": list(Job.objects.order_by("id").values()),
        "runs": list(Run.objects.order_by("id").values()),
        "data": list(JobData.objects.order_by("id").values()),
        "counters": list(ThroughputMinute.objects.order_by("id").values()),
        "buckets": list(Bucket.objects.order_by("name").values()),
    }


def snapshot(job_id: str) -> dict[str, Any]:
    return {
        "job": Job.objects.filter(id=job_id).values().first(),
        "runs": list(Run.objects.filter(job_id=job_id).order_by("id").values()),
        "data": list(JobData.objects.filter(job_id=job_id).order_by("kind").values()),
    }


def open_runs(job_id: str) -> list[dict[str, Any]]:
    return list(Run.objects.filter(job_id=job_id, finished_at__isnull=True).values())


def outcome_totals() -> Counter[str]:
    totals: Counter[str] = Counter()
    for outcome, count in ThroughputMinute.objects.values_list("outcome", "count"):
        totals[outcome] += count
    return totals


def job(job_id: str) -> dict[str, Any]:
    row = Job.objects.filter(id=job_id).values().first()
    assert row is not None, f"job {job_id} is gone"
    return row


def started(queue: str, worker: str = "w1", **fields: Any) -> AdmissionUnit:
    enqueue_one(fields.pop("task", NOOP), queue=queue, **fields)
    return admit_one(worker, [queue])


# == 1. plain successes: the one statement writes what the general paths write =============

#: (wait between due and admitted in ms, the bucket floor(log2(wait + 1)) by definition, result)
WAITS: list[tuple[float, int, Any]] = [
    (0, 0, None),
    (1, 1, {"n": 1}),
    (3, 2, 0),
    (7, 3, ""),
    (1000, 9, [1, "x", None]),
    (0.5, 0, False),
    (2.999, 1, {"nested": {"a": [1.5]}}),
    (6.999, 2, None),
    (1022.999, 9, "last"),
    (1023, 10, {"edge": True}),
]
RETENTIONS = [60_000, 3_600_000, 1]
BUCKET = "diff-class"


def _plain_scenario(clk: Any, queue: str) -> tuple[list[AckRequest], list[dict[str, Any]]]:
    """Running jobs in ``queue`` with known waits; their plain-success acks and what each
    ack must leave (attempt, fence, retention, wait bucket, result)."""
    requests, expected = [], []
    for i, (wait, bucket, result) in enumerate(WAITS):
        clk.freeze(EPOCH + timedelta(seconds=i))
        retention = RETENTIONS[i % len(RETENTIONS)]
        job_id = enqueue_one(NOOP, queue=queue, args=[i], lease_ms=LONG_LEASE_MS, retention_ms=retention)
        clk.advance(wait)
        unit = admit_one("w1", [queue])
        assert unit.lease.job_id == job_id
        requests.append(AckRequest(unit.lease, Outcome.SUCCESS, result=result))
        expected.append({"attempt": 1, "fence": 1, "retention": retention, "bucket": bucket, "result": result})
    # A second claim and a second attempt: retried once (counted as retried), promoted, re-admitted.
    i = len(WAITS)
    clk.freeze(EPOCH + timedelta(seconds=i))
    enqueue_one(NOOP, queue=queue, args=[i], lease_ms=LONG_LEASE_MS, retention_ms=60_000)
    first = admit_one("w1", [queue])
    services.ack(first.lease, Outcome.RETRY, error="boom", delay_ms=250)
    clk.advance(257)
    assert services.promote_due(10) == 1
    again = admit_one("w2", [queue])
    assert again.lease == LeaseRef(first.lease.job_id, 2) and again.attempt == 1
    requests.append(AckRequest(again.lease, Outcome.SUCCESS, result={"attempt": 2}))
    expected.append({"attempt": 2, "fence": 2, "retention": 60_000, "bucket": 3, "result": {"attempt": 2}})
    # A job charged to a rate class (admitted by the general path), acked with no weight correction.
    i += 1
    clk.freeze(EPOCH + timedelta(seconds=i))
    enqueue_one(NOOP, queue=queue, args=[i], lease_ms=LONG_LEASE_MS, retention_ms=60_000, rate_class=BUCKET, weight=2)
    clk.advance(15)
    charged = admit_one("w1", [queue])
    assert job(charged.lease.job_id)["charged_weight"] == 2
    requests.append(AckRequest(charged.lease, Outcome.SUCCESS, result=None))
    expected.append({"attempt": 1, "fence": 1, "retention": 60_000, "bucket": 4, "result": None})
    return requests, expected


def test_plain_successes_leave_the_same_rows_through_the_one_statement_and_the_general_paths(clk):
    services.set_rate_limit(BUCKET, limit=100, window_ms=1_000)
    paths = ("fast", "batch", "single")
    scenarios = {path: _plain_scenario(clk, path) for path in paths}
    clk.freeze(ACK_AT)

    with django_sql() as seen:
        fast = services.ack_many(scenarios["fast"][0])
    assert job_sql(seen) == [], "a plain success went down the general path"
    with django_sql() as seen:
        batch = ack_batch._ack_general(scenarios["batch"][0])
    assert general_ack_ids(seen, [r.lease.job_id for r in scenarios["batch"][0]]), "the general path did not run"
    single = [services.ack(r.lease, r.outcome, result=r.result) for r in scenarios["single"][0]]

    count = len(scenarios["fast"][0])
    assert [(r.state, r.at, r.error) for r in fast] == [("completed", ACK_AT, None)] * count
    assert [(r.state, r.at, r.error) for r in batch] == [("completed", ACK_AT, None)] * count
    assert single == ["completed"] * count
    assert [r.lease for r in fast] == [r.lease for r in scenarios["fast"][0]]

    worlds = {path: world(path) for path in paths}
    for part in ("jobs", "runs", "results", "counters"):
        assert worlds["fast"][part] == worlds["batch"][part], part
        assert worlds["fast"][part] == worlds["single"][part], part

    # ... and what they agree on is the definition.
    expected = scenarios["fast"][1]
    got = worlds["fast"]
    assert len(got["jobs"]) == len(expected) == count
    for row, runs, results, want in zip(got["jobs"], got["runs"], got["results"], expected):
        assert row["state"] == "completed" and row["attempt"] == want["attempt"] and row["fence"] == want["fence"]
        assert row["finalized_at"] == ACK_AT
        assert row["expires_at"] == ACK_AT + timedelta(milliseconds=want["retention"])
        assert row["lease_holder"] is None and row["lease_expires_at"] is None
        last = runs[-1]
        assert (last["finished_at"], last["outcome"], last["error"], last["logs"], last["recorded"]) == (
            ACK_AT, "success", "", [], False,
        )
        assert (last["attempt"], last["fence"]) == (want["attempt"], want["fence"])
        assert all(r["finished_at"] is not None for r in runs)
        if want["result"] is None:
            assert results == []
        else:
            assert [(d["kind"], d["attempt"], d["fence"], d["at"], d["data"]) for d in results] == [
                ("result", want["attempt"], want["fence"], ACK_AT, want["result"])
            ]
    ack_minute = ACK_AT.replace(second=0, microsecond=0)
    completed = Counter((ack_minute, "completed", want["bucket"]) for want in expected)
    retried = {(EPOCH, "retried", 0): 1}  # the retried job's first attempt, admitted at once
    assert got["counters"] == {**completed, **retried}


def test_a_wait_just_below_a_bucket_edge_lands_in_the_same_bucket_on_both_paths(clk):
    wait_ms = (2**21 - 1) - 0.001  # 34m57.150999s: floor(log2(wait + 1)) is 20
    leases = {}
    for path in ("fast", "general"):
        clk.freeze(EPOCH)
        enqueue_one(NOOP, queue=path, lease_ms=LONG_LEASE_MS)
        clk.advance(wait_ms)
        leases[path] = admit_one("w1", [path]).lease
    services.ack_many([AckRequest(leases["fast"], Outcome.SUCCESS)])
    ack_batch._ack_general([AckRequest(leases["general"], Outcome.SUCCESS)])
    assert {b for (_, _, b) in counters("general")} == {20}
    assert {b for (_, _, b) in counters("fast")} == {20}


# == 2. a mixed batch: every reply right, nothing of a refused ack written ==================


def test_a_mixed_batch_replies_to_each_ack_and_writes_nothing_for_the_refused_ones(clk):
    clk.freeze(EPOCH)
    plain = started("m-plain", retention_ms=60_000, lease_ms=1_000)
    stale = started("m-stale", lease_ms=1_000)
    services.release(stale.lease)
    current = admit_one("w2", ["m-stale"])
    assert current.lease.fence == stale.lease.fence + 1
    late = started("m-late", lease_ms=100)
    gone = started("m-gone", task=EPHEMERAL, retention_ms=0, lease_ms=1_000)
    retry = started("m-retry", lease_ms=1_000, max_attempts=5)
    twice = started("m-twice", lease_ms=1_000, retention_ms=60_000)
    bad = started("m-bad", lease_ms=1_000)
    clk.advance(100)  # the late lease expires (expiry == now); the others have 900 ms left
    now = clk.now()

    refused = [current.lease.job_id, late.lease.job_id, bad.lease.job_id]
    before = {job_id: snapshot(job_id) for job_id in refused}
    totals = outcome_totals()
    with django_sql() as seen:
        replies = services.ack_many([
            AckRequest(plain.lease, Outcome.SUCCESS, result={"plain": 1}),
            AckRequest(stale.lease, Outcome.SUCCESS, result={"by": "stale"}),
            AckRequest(late.lease, Outcome.SUCCESS, result={"by": "late"}),
            AckRequest(gone.lease, Outcome.SUCCESS, result={"gone": True}),
            AckRequest(retry.lease, Outcome.RETRY, error="boom", delay_ms=5_000, logs=["tried"]),
            AckRequest(twice.lease, Outcome.SUCCESS, result={"first": True}),
            AckRequest(twice.lease, Outcome.SUCCESS, result={"second": True}),
            AckRequest(bad.lease, Outcome.SUCCESS, actual_weight=-1),
            AckRequest(("only-one-part",), Outcome.SUCCESS),
            AckRequest(LeaseRef("no-such-job", 1), Outcome.SUCCESS),
        ])

    rejected, invalid, fine = LeaseRejected, InvalidEnvelope, type(None)
    assert [(r.state, type(r.error)) for r in replies] == [
        ("completed", fine),
        (None, rejected),
        (None, rejected),
        (None, fine),  # deleted at its ack: retention 0
        ("retryable", fine),
        ("completed", fine),
        (None, rejected),
        (None, invalid),
        (None, invalid),
        (None, rejected),
    ]
    assert "stale" in str(replies[1].error) and "expired" in str(replies[2].error)
    assert "twice" in str(replies[6].error) and "no longer exists" in str(replies[9].error)
    assert "actual_weight" in str(replies[7].error) and "lease" in str(replies[8].error)
    assert [r.lease for r in replies[7:9]] == [None, None]
    ok = [i for i, r in enumerate(replies) if r.ok]
    assert [replies[i].at for i in ok] == [now] * len(ok)
    assert replies[0].lease == plain.lease and replies[4].lease == retry.lease

    # The plain successes were the one statement's; the refusals and the rest the general path's.
    routed = general_ack_ids(seen, [plain.lease.job_id, twice.lease.job_id, stale.lease.job_id, late.lease.job_id,
                                    gone.lease.job_id, retry.lease.job_id])
    assert routed == {stale.lease.job_id, late.lease.job_id, gone.lease.job_id, retry.lease.job_id, twice.lease.job_id}

    # Refused: nothing written -- not the current holder's row, not the expired one, not the malformed one.
    assert {job_id: snapshot(job_id) for job_id in refused} == before
    assert services.get_result(current.lease.job_id) is None
    # Applied, each as ack would.
    assert state_of(plain.lease.job_id) == "completed" and services.get_result(plain.lease.job_id).data == {"plain": 1}
    assert job(twice.lease.job_id)["attempt"] == 1
    assert services.get_result(twice.lease.job_id).data == {"first": True}
    assert [r["outcome"] for r in Run.objects.filter(job_id=twice.lease.job_id).values()] == ["success"]
    assert not Job.objects.filter(id=gone.lease.job_id).exists()
    assert not Run.objects.filter(job_id=gone.lease.job_id).exists()
    assert not JobData.objects.filter(job_id=gone.lease.job_id).exists()
    retried = job(retry.lease.job_id)
    assert (retried["state"], retried["attempt"], retried["run_at"]) == ("retryable", 1, now + timedelta(seconds=5))
    assert [(e.outcome, e.error, e.logs) for e in services.errors(retry.lease.job_id)] == [("retry", "boom", ["tried"])]
    gained = outcome_totals() - totals
    assert gained == Counter({"completed": 3, "retried": 1})


def test_a_lease_acked_twice_keeps_its_first_ack_even_when_the_second_is_a_plain_success(clk):
    clk.freeze(EPOCH)
    fast = started("twice-fast", lease_ms=10_000, max_attempts=5)
    general = started("twice-general", lease_ms=10_000, max_attempts=5)

    def batch(lease: LeaseRef) -> list[AckRequest]:
        return [
            AckRequest(lease, Outcome.RETRY, error="first", delay_ms=1_000),
            AckRequest(lease, Outcome.SUCCESS, result={"second": True}),
        ]

    by_general = ack_batch._ack_general(batch(general.lease))
    assert by_general[0].state == "retryable" and isinstance(by_general[1].error, LeaseRejected)
    assert state_of(general.lease.job_id) == "retryable"

    by_fast = services.ack_many(batch(fast.lease))
    assert [(r.state, type(r.error)) for r in by_fast] == [(r.state, type(r.error)) for r in by_general]
    assert state_of(fast.lease.job_id) == "retryable"
    assert services.get_result(fast.lease.job_id) is None


# == 3. the claim: free jobs by the statement, the rest by the general path =================

MIX = "mix"
LIMITED = "one-token"
FREE_LEASE_MS, HELD_LEASE_MS = 40_000, 50_000
CLAIM_AT = EPOCH + timedelta(seconds=5)
#: Claim order in MIX: priority desc, run_at, id.
CLAIM_ORDER = ["r1", "r2", "c1", "c2", "f2", "f5", "f1", "f3", "r3", "f4"]
FREE = {"f1", "f2", "f3", "f4", "f5"}


def _claim_mix(clk: Any) -> None:
    """MIX holds free jobs, jobs of a rate class whose bucket holds one token, and jobs of a
    task capped at one running; a paused queue and another queue hold higher priorities."""
    services.set_rate_limit(LIMITED, limit=1, window_ms=3_600_000)
    services.set_task_config(ADD, max_active=1)
    clk.freeze(EPOCH)
    services.enqueue([envelope(NOOP, id="f5", queue=MIX, lease_ms=FREE_LEASE_MS)])
    earlier = admit_one("w0", [MIX])
    services.checkpoint(earlier.lease, "step-2")  # a JSON string, handed back as one
    services.release(earlier.lease)  # available again at EPOCH, fence 1
    clk.advance(1)
    held = {"queue": MIX, "lease_ms": HELD_LEASE_MS}
    services.enqueue([
        envelope(NOOP, id="r1", priority=10, rate_class=LIMITED, **held),
        envelope(NOOP, id="r2", priority=10, rate_class=LIMITED, **held),
        envelope(ADD, id="c1", priority=7, args=[1, 2], **held),
        envelope(ADD, id="c2", priority=7, args=[3, 4], **held),
    ])
    clk.advance(1)
    free = {"queue": MIX, "lease_ms": FREE_LEASE_MS}
    services.enqueue([
        envelope(NOOP, id="f3", args=["three"], **free),  # same run_at as f1: the id decides
        envelope(NOOP, id="f2", priority=5, **free),
        envelope(NOOP, id="f1", args=["one"], **free),
    ])
    clk.advance(1)
    services.enqueue([
        envelope(NOOP, id="r3", rate_class=LIMITED, **held),
        envelope(NOOP, id="f4", priority=-5, **free),
        envelope(NOOP, id="p1", queue="stopped", priority=50),
        envelope(NOOP, id="o1", queue="elsewhere", priority=60),
    ])
    services.pause_queue("stopped")
    clk.freeze(CLAIM_AT)


@pytest.mark.parametrize(
    ("limit", "by_statement", "by_general"),
    [
        (3, [], ["r1", "c1", "f2"]),  # every candidate of the first 3 needs a bucket or a cap
        (6, ["f2", "f5"], ["r1", "c1", "f1", "f3"]),
        (20, ["f2", "f5", "f1", "f3", "f4"], ["r1", "c1"]),
    ],
)
def test_admit_claims_the_free_jobs_and_what_buckets_and_caps_allow(clk, limit, by_statement, by_general):
    _claim_mix(clk)
    fences = dict(Job.objects.values_list("id", "fence"))
    others = {i: snapshot(i) for i in fences if i not in {*by_statement, *by_general}}

    with django_sql() as seen:
        units = services.admit("w9", [MIX, "stopped"], limit)

    got = [u.lease.job_id for u in units]
    assert sorted(got) == sorted(by_statement + by_general)
    # One batch in claim order, whichever path claimed each job; the general path never saw
    # the statement's jobs.
    assert got == sorted(got, key=CLAIM_ORDER.index)
    assert general_claim_ids(seen, list(fences)) == set(by_general)

    for unit in units:
        row = job(unit.lease.job_id)
        lease_ms = FREE_LEASE_MS if row["id"] in FREE else HELD_LEASE_MS
        assert row["fence"] == fences[row["id"]] + 1 == unit.lease.fence
        assert (row["state"], row["lease_holder"]) == ("running", "w9")
        assert row["lease_expires_at"] == CLAIM_AT + timedelta(milliseconds=lease_ms) == unit.lease_expires_at
        assert row["attempted_at"] == CLAIM_AT == unit.attempted_at
        assert row["started_at"] == (EPOCH if row["id"] == "f5" else CLAIM_AT) == unit.started_at
        assert row["charged_weight"] == (1.0 if row["rate_class"] else 0.0)
        (run,) = open_runs(row["id"])
        assert (run["fence"], run["worker_id"], run["attempt"], run["started_at"]) == (
            row["fence"], "w9", row["attempt"] + 1, CLAIM_AT,
        )
        assert unit.first_run is (row["id"] != "f5")
        assert unit.checkpoint == ("step-2" if row["id"] == "f5" else None)
        assert (unit.envelope.queue, unit.envelope.task) == (MIX, row["task"])
    assert {i: snapshot(i) for i in others} == others  # paused, other queue, blocked, beyond the limit
    assert services.bucket_tokens(LIMITED) == 0


@pytest.mark.parametrize("lease_ms", [None, 5_000])
def test_the_claim_statement_admits_what_the_general_path_admits(clk, lease_ms):
    def scenario(queue: str) -> None:
        clk.freeze(EPOCH)
        enqueue_one(NOOP, queue=queue, args=[1], lease_ms=1_000, max_attempts=5)
        retried = admit_one("w0", [queue])
        services.ack(retried.lease, Outcome.RETRY, delay_ms=100)  # attempt 1, due at +100 ms
        enqueue_one(NOOP, queue=queue, args=[3], lease_ms=1_000, priority=-1)
        crashed = admit_one("w0", [queue])
        enqueue_one(NOOP, queue=queue, args=[2], lease_ms=20_000)
        released = admit_one("w0", [queue])
        services.checkpoint(released.lease, {"step": 2})
        services.release(released.lease)  # fence 1, available again
        clk.advance(1_000)
        assert services.promote_due(10) == 1
        assert [(r.job_id, r.crash_attempt) for r in services.reclaim_expired(10)] == [(crashed.lease.job_id, 1)]
        enqueue_one(NOOP, queue=queue, args=[0], priority=3, kwargs={"k": "v"}, meta={"m": 1}, lease_ms=30_000)
        enqueue_one(NOOP, queue=queue, args=[4], lease_ms=30_000)

    def unit_view(u: AdmissionUnit) -> tuple[Any, ...]:
        env = _without(vars(u.envelope), "id", "queue", "fingerprint")
        return (u.lease.fence, u.attempt, u.crash_attempt, u.checkpoint, u.lease_expires_at, u.enqueued_at,
                u.started_at, u.attempted_at, u.first_run, env)

    scenario("fast")
    scenario("general")
    clk.freeze(CLAIM_AT)
    with django_sql() as seen:
        fast = services.admit("w1", ["fast"], 10, lease_ms=lease_ms)
    assert job_sql(seen) == [], "a free job went down the general path"
    general = admission._admit("w1", ["general"], 10, lease_ms=lease_ms)

    assert len(fast) == len(general) == 5
    assert [unit_view(u) for u in fast] == [unit_view(u) for u in general]
    assert [u.envelope.args for u in fast] == [[0], [2], [1], [4], [3]]  # priority, then run_at
    assert [(u.attempt, u.crash_attempt, u.lease.fence) for u in fast] == [
        (0, 0, 1), (0, 0, 2), (1, 0, 2), (0, 0, 1), (0, 1, 2),
    ]
    assert fast[1].checkpoint == {"step": 2} and [u.first_run for u in fast] == [True, False, False, True, False]
    for u in fast:
        assert u.attempted_at == CLAIM_AT
        assert u.lease_expires_at == CLAIM_AT + timedelta(milliseconds=lease_ms or u.envelope.lease_ms)
    fast_world, general_world = world("fast"), world("general")
    assert fast_world["jobs"] == general_world["jobs"]
    assert fast_world["runs"] == general_world["runs"]
    assert all(len([r for r in runs if r["finished_at"] is None]) == 1 for runs in fast_world["runs"])


# == 4. inside the caller's transaction ========================================================


class _RolledBack(Exception):
    pass


def test_admit_and_ack_many_inside_a_rolled_back_transaction_write_nothing(clk):
    clk.freeze(EPOCH)
    services.set_rate_limit("rb-class", limit=5, window_ms=60_000)
    services.enqueue([envelope(NOOP, queue="rb", args=[i], lease_ms=60_000) for i in range(3)])
    services.enqueue([envelope(NOOP, queue="rb", args=[3], rate_class="rb-class", lease_ms=60_000)])
    running = [started("rb-run", lease_ms=60_000, max_attempts=5) for _ in range(2)]
    clk.advance(10)
    before = everything()

    with pytest.raises(_RolledBack), transaction.atomic():
        units = services.admit("w2", ["rb"], 10)
        assert sorted(u.envelope.args for u in units) == [[0], [1], [2], [3]]
        replies = services.ack_many([
            AckRequest(units[0].lease, Outcome.SUCCESS, result={"inside": 1}),
            AckRequest(running[0].lease, Outcome.SUCCESS, result={"inside": 2}),
            AckRequest(running[1].lease, Outcome.RETRY, error="x"),
            AckRequest(LeaseRef(running[0].lease.job_id, 99), Outcome.SUCCESS),
        ])
        assert [r.state for r in replies] == ["completed", "completed", "retryable", None]
        assert state_of(units[0].lease.job_id) == "completed"  # visible inside
        assert services.get_result(running[0].lease.job_id).data == {"inside": 2}
        raise _RolledBack

    assert everything() == before
    # The connection still serves both fast paths (the prepared statements survive the rollback).
    units = services.admit("w2", ["rb"], 10)
    assert sorted(u.envelope.args for u in units) == [[0], [1], [2], [3]]
    assert [u.lease.fence for u in units] == [1, 1, 1, 1]
    replies = services.ack_many([AckRequest(u.lease, Outcome.SUCCESS) for u in [*units, *running]])
    assert [r.state for r in replies] == ["completed"] * 6
    assert outcome_totals() == Counter({"completed": 6})


# == 5. real threads ===========================================================================


def test_four_admitters_claim_each_of_four_hundred_jobs_exactly_once(live_clock):
    services.set_rate_limit("conc-roomy", limit=1_000, window_ms=1_000)
    results = services.enqueue([
        envelope(NOOP, queue="four", priority=i % 5, rate_class="conc-roomy" if i % 20 == 0 else None)
        for i in range(400)
    ])
    job_ids = [r.id for r in results]

    def admitter(i: int) -> list[str]:
        mine: list[str] = []
        for _ in range(10_000):
            units = services.admit(f"w{i}", ["four"], 10)
            mine += [u.lease.job_id for u in units]
            if not units and not Job.objects.filter(queue="four", state="available").exists():
                return mine
        raise AssertionError(f"w{i} never saw the queue drained")

    got = run_threads(4, admitter)

    flat = [job_id for mine in got for job_id in mine]
    assert len(flat) == len(set(flat)) == 400, "a job was handed to two admitters"
    assert set(flat) == set(job_ids)
    assert sum(1 for mine in got if mine) >= 2, "the admitters did not actually run concurrently"
    assert_each_admitted_once(job_ids, fence=1)
    holders = dict(Job.objects.filter(queue="four").values_list("id", "lease_holder"))
    assert all(holders[job_id] == f"w{i}" for i, mine in enumerate(got) for job_id in mine)
    assert Run.objects.filter(job_id__in=job_ids, finished_at__isnull=True).count() == 400


def test_overlapping_concurrent_ack_batches_complete_each_job_once(live_clock):
    services.enqueue([envelope(NOOP, queue="acks4", lease_ms=LONG_LEASE_MS) for _ in range(200)])
    leases = [u.lease for u in services.admit("w1", ["acks4"], 200)]
    assert len(leases) == 200
    chunks = [leases[i::4] for i in range(4)]
    # Every lease is in two threads' batches, in opposite orders.
    batches = [chunks[i] + list(reversed(chunks[(i + 1) % 4])) for i in range(4)]

    def acker(i: int) -> list[AckReply]:
        return services.ack_many([AckRequest(lease, Outcome.SUCCESS, result={"by": i}) for lease in batches[i]])

    replies = run_threads(4, acker)

    wins: Counter[str] = Counter()
    for i, batch_replies in enumerate(replies):
        for reply in batch_replies:
            assert reply.ok or isinstance(reply.error, LeaseRejected), reply
            if reply.ok:
                wins[reply.lease.job_id] += 1
                assert services.get_result(reply.lease.job_id).data == {"by": i}
    assert set(wins.values()) == {1} and len(wins) == 200
    assert services.counts("acks4")["completed"] == 200
    assert outcome_totals() == Counter({"completed": 200})
    assert Run.objects.filter(job_id__in=list(wins), outcome="success").count() == 200


# == 6. stale planner statistics ===============================================================


def _claim_plan() -> str:
    """EXPLAIN of the claim statement over every queue, under the statement's own planner settings."""
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in claim_pg.planner(0):
            cursor.execute(f"SET LOCAL {setting}")
        cursor.execute("EXPLAIN " + claim_pg.claim_sql(0), [100, "w-plan", None, "w-plan"])
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_claim_after_analyze_saw_only_finished_jobs_still_walks_the_claim_index(live_clock):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE boson_job SET (autovacuum_enabled = false)")  # keep the statistics stale
    try:
        for _ in range(5):
            services.enqueue([envelope(NOOP, queue="old") for _ in range(1_000)])
        Job.objects.filter(queue="old").update(
            state="completed", attempt=1, finalized_at=EPOCH, expires_at=EPOCH + timedelta(days=1)
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE boson_job")
            cursor.execute("SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'boson_job' AND attname = 'state'")
            (seen_states,) = cursor.fetchone()
        assert "completed" in seen_states and "available" not in seen_states  # what the planner will believe
        for batch in range(5):
            live_clock.advance(1)
            services.enqueue([
                envelope(NOOP, queue=f"new{i % 3}", priority=(i * 7 + batch) % 5 - 2) for i in range(1_000)
            ])
        order = Job.objects.filter(state="available").order_by("-priority", "run_at", "id")
        expected = list(order.values_list("id", flat=True)[:100])

        plan = _claim_plan()
        units = services.admit("w1", [], 100)

        assert [u.lease.job_id for u in units] == expected
        # It walks the claim index in claim order: no bitmap scan, no sort of every available row.
        assert "Index Scan using boson_job_claim" in plan and "Bitmap" not in plan and "Sort" not in plan, plan
        expected_named = list(order.filter(queue__in=["new1", "new2"]).values_list("id", flat=True)[:100])
        assert [u.lease.job_id for u in services.admit("w1", ["new1", "new2"], 100)] == expected_named
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE boson_job RESET (autovacuum_enabled)")


def _ack_plan(leases: Sequence[LeaseRef]) -> str:
    """EXPLAIN of the plain-success ack statement for ``leases``."""
    from boson_django.drivers.postgresql.acks import complete_sql

    params = [json.dumps([[lease.job_id, lease.fence, None] for lease in leases]), 1000, 0]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + complete_sql(False), params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_an_ack_batch_looks_each_job_up_by_its_key_not_through_the_running_jobs(live_clock):
    services.enqueue([envelope(NOOP, queue="many") for _ in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE boson_job")  # the statistics see no running job
    units = services.admit("w1", ["many"], 256)

    plan = _ack_plan([u.lease for u in units])
    replies = services.ack_many([AckRequest(u.lease, Outcome.SUCCESS) for u in units])

    assert all(reply.state == "completed" for reply in replies)
    # A scan of the partial index of running jobs per ack compares every pair (quadratic).
    assert "boson_job_task_state" not in plan and "boson_job_lease" not in plan, plan
    assert "Index Scan using boson_job_pkey on boson_job j " in plan, plan
