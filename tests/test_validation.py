"""SPEC section 4: every public entry point refuses bad input, naming the field, writing nothing."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from django.test import override_settings

from boson_django import clock, services, validation
from boson_django.compat import task
from boson_django.errors import InvalidEnvelope
from boson_django.models import (
    Bucket, Duty, Job, JobData, QuarantinedFingerprint, Queue, Run, StoreClock, TaskConfig,
)
from boson_django.services import Envelope, Outcome
from tests.factories import ADD, NOOP, running_job

STORE_TABLES = (Job, Run, Queue, JobData, Bucket, TaskConfig, Duty, QuarantinedFingerprint, StoreClock)


def snapshot() -> dict[str, list[dict]]:
    return {m.__name__: list(m.objects.order_by("pk").values()) for m in STORE_TABLES}


def refused(call, field: str):
    """``call()`` raises InvalidEnvelope (a ValueError) naming ``field`` and changes no table."""
    before = snapshot()
    with pytest.raises(InvalidEnvelope) as caught:
        call()
    assert isinstance(caught.value, ValueError)
    assert caught.value.field.split(".")[0] == field, str(caught.value)
    assert field in str(caught.value)
    assert snapshot() == before, "a refused call wrote to the store"
    return caught.value


class Unjsonable:
    pass


BAD_ENVELOPES = {
    # task names
    "unknown task": ({"task": "tests.testapp.tasks.nope"}, "task"),
    "module, not a task": ({"task": "os.system"}, "task"),
    "function outside task modules": ({"task": "tests.factories.envelope"}, "task"),
    "empty task": ({"task": ""}, "task"),
    "blank task": ({"task": "   "}, "task"),
    "task not a string": ({"task": 42}, "task"),
    "task None": ({"task": None}, "task"),
    # args / kwargs / meta
    "args not a list": ({"args": "abc"}, "args"),
    "args a dict": ({"args": {"a": 1}}, "args"),
    "args object": ({"args": [Unjsonable()]}, "args"),
    "args NaN": ({"args": [math.nan]}, "args"),
    "args inf": ({"args": [math.inf]}, "args"),
    "args -inf nested": ({"args": [[1, {"x": -math.inf}]]}, "args"),
    "args set": ({"args": [{1, 2}]}, "args"),
    "args bytes": ({"args": [b"raw"]}, "args"),
    "args datetime": ({"args": [datetime(2030, 1, 1)]}, "args"),
    "args Decimal": ({"args": [Decimal("1.5")]}, "args"),
    "args NUL": ({"args": ["a\x00b"]}, "args"),
    "args lone surrogate": ({"args": ["\ud800"]}, "args"),
    "kwargs not a dict": ({"kwargs": [1]}, "kwargs"),
    "kwargs int key": ({"kwargs": {1: "a"}}, "kwargs"),
    "kwargs tuple key": ({"kwargs": {("a",): 1}}, "kwargs"),
    "kwargs nested set": ({"kwargs": {"a": [{"b": {1}}]}}, "kwargs"),
    "kwargs NaN": ({"kwargs": {"x": float("nan")}}, "kwargs"),
    "kwargs NUL key": ({"kwargs": {"a\x00": 1}}, "kwargs"),
    "meta not a dict": ({"meta": "m"}, "meta"),
    "meta bytes": ({"meta": {"b": b"x"}}, "meta"),
    "meta non-str key": ({"meta": {None: 1}}, "meta"),
    "meta object": ({"meta": {"o": object()}}, "meta"),
    # weights
    "weight negative": ({"weight": -1}, "weight"),
    "weight NaN": ({"weight": math.nan}, "weight"),
    "weight inf": ({"weight": math.inf}, "weight"),
    "weight huge int": ({"weight": 10**400}, "weight"),
    "weight string": ({"weight": "1"}, "weight"),
    "weight bool": ({"weight": True}, "weight"),
    # priorities
    "priority 101": ({"priority": 101}, "priority"),
    "priority -101": ({"priority": -101}, "priority"),
    "priority huge": ({"priority": 10**400}, "priority"),
    "priority True": ({"priority": True}, "priority"),
    "priority False": ({"priority": False}, "priority"),
    "priority fraction": ({"priority": 1.5}, "priority"),
    "priority NaN": ({"priority": math.nan}, "priority"),
    "priority string": ({"priority": "1"}, "priority"),
    # queue names
    "queue empty": ({"queue": ""}, "queue"),
    "queue blank": ({"queue": "  "}, "queue"),
    "queue not a string": ({"queue": 7}, "queue"),
    "queue too long": ({"queue": "q" * 101}, "queue"),
    "queue NUL": ({"queue": "q\x00"}, "queue"),
    # other policy fields and ids
    "max_attempts 0": ({"max_attempts": 0}, "max_attempts"),
    "max_attempts huge": ({"max_attempts": 10**30}, "max_attempts"),
    "max_attempts bool": ({"max_attempts": True}, "max_attempts"),
    "lease_ms 0": ({"lease_ms": 0}, "lease_ms"),
    "lease_ms huge": ({"lease_ms": 10**17}, "lease_ms"),
    "lease_ms inf": ({"lease_ms": math.inf}, "lease_ms"),
    "retention_ms negative": ({"retention_ms": -1}, "retention_ms"),
    "retention_ms huge": ({"retention_ms": 10**17}, "retention_ms"),
    "timeout_ms 0": ({"timeout_ms": 0}, "timeout_ms"),
    "timeout_ms huge": ({"timeout_ms": 10**30}, "timeout_ms"),
    "run_at naive": ({"run_at": datetime(2030, 1, 1)}, "run_at"),
    "run_at string": ({"run_at": "2030-01-01T00:00:00Z"}, "run_at"),
    "unique_key empty": ({"unique_key": ""}, "unique_key"),
    "unique_key NUL": ({"unique_key": "k\x00"}, "unique_key"),
    "rate_class empty": ({"rate_class": ""}, "rate_class"),
    "id empty": ({"id": ""}, "id"),
    "id too long": ({"id": "x" * 65}, "id"),
    "fingerprint too long": ({"fingerprint": "f" * 65}, "fingerprint"),
}


def _envelope(fields: dict) -> Envelope:
    return Envelope(**{"task": NOOP, **fields})


@pytest.mark.parametrize("case", list(BAD_ENVELOPES))
def test_enqueue_refuses_a_bad_envelope(store_clock, case):
    fields, field = BAD_ENVELOPES[case]
    refused(lambda: services.enqueue([_envelope(fields)]), field)


@pytest.mark.parametrize("case", ["unknown task", "args NaN", "weight negative", "priority 101", "queue empty"])
def test_one_bad_envelope_writes_none_of_its_batch(store_clock, case):
    fields, field = BAD_ENVELOPES[case]
    batch = [Envelope(task=NOOP, queue="fresh-1"), Envelope(task=ADD, args=[1, 2], queue="fresh-2"),
             _envelope(fields), Envelope(task=NOOP, queue="fresh-3")]
    error = refused(lambda: services.enqueue(batch), field)
    assert error.index == 2 and str(error).startswith(f"envelope[2].{field}")
    assert not Queue.objects.filter(name__startswith="fresh").exists()


def test_a_non_envelope_is_refused(store_clock):
    refused(lambda: services.enqueue([{"task": NOOP}]), "envelope")


@override_settings(BOSON={"MAX_PAYLOAD_BYTES": 100, "TASK_MODULES": ["tests.testapp.more_tasks"]})
@pytest.mark.parametrize("field", ["args", "kwargs", "meta"])
def test_payload_over_max_payload_bytes_is_refused_naming_the_field(store_clock, field):
    big = {"args": ["x" * 200], "kwargs": {"k": "x" * 200}, "meta": {"m": "x" * 200}}[field]
    error = refused(lambda: services.enqueue([Envelope(task=NOOP, **{field: big})]), field)
    assert "MAX_PAYLOAD_BYTES=100" in str(error)


@override_settings(BOSON={"MAX_PAYLOAD_BYTES": 100, "TASK_MODULES": ["tests.testapp.more_tasks"]})
def test_payload_limit_counts_args_kwargs_and_meta_together(store_clock):
    # '["aaaa…"]' + '{}' + '{}': exactly at the limit is accepted, one byte over is not.
    at_limit = ["a" * (100 - len('[""]') - 4)]
    services.enqueue([Envelope(task=NOOP, args=at_limit)])
    over = ["a" * (101 - len('[""]') - 4)]
    refused(lambda: services.enqueue([Envelope(task=NOOP, args=over)]), "args")
    refused(lambda: services.enqueue([Envelope(task=NOOP, args=["a" * 40], kwargs={"b": "b" * 50})]), "kwargs")


# -- writes under a lease --------------------------------------------------------------

BAD_DELAYS = [-1, -0.5, math.nan, math.inf, -math.inf, 10**17, 1e300, 10**400, "10", True]


@pytest.mark.parametrize("delay", BAD_DELAYS, ids=repr)
@pytest.mark.parametrize("outcome", [Outcome.RETRY, Outcome.SNOOZE, Outcome.RATE_LIMITED])
def test_ack_refuses_bad_delays(store_clock, outcome, delay):
    unit = running_job()
    refused(lambda: services.ack(unit.lease, outcome, delay_ms=delay), "delay_ms")
    assert services.ack(unit.lease, Outcome.SUCCESS) == "completed", "the lease survived the refusal"


@pytest.mark.parametrize("delay", [None, 0, 0.0])
def test_snooze_without_a_positive_delay_is_refused(store_clock, delay):
    unit = running_job()
    refused(lambda: services.ack(unit.lease, Outcome.SNOOZE, delay_ms=delay), "delay_ms")


BAD_ACKS = {
    "unknown outcome": (dict(outcome="explode"), "outcome"),
    "LEASE_LOST": (dict(outcome=Outcome.LEASE_LOST), "outcome"),
    "actual_weight negative": (dict(actual_weight=-1), "actual_weight"),
    "actual_weight NaN": (dict(actual_weight=math.nan), "actual_weight"),
    "actual_weight inf": (dict(actual_weight=math.inf), "actual_weight"),
    "logs not a list": (dict(logs="line"), "logs"),
    "logs not strings": (dict(logs=[1, 2]), "logs"),
    "error not a string": (dict(error=ValueError("x")), "error"),
    "result not JSON": (dict(result={"s": {1}}), "result"),
    "result NaN": (dict(result=math.nan), "result"),
}


@pytest.mark.parametrize("case", list(BAD_ACKS))
def test_ack_refuses_bad_arguments(store_clock, case):
    kwargs, field = BAD_ACKS[case]
    kwargs = {"outcome": Outcome.SUCCESS, **kwargs}
    unit = running_job()
    refused(lambda: services.ack(unit.lease, **kwargs), field)


def test_free_text_in_errors_and_logs_is_stored_not_refused(store_clock):
    unit = running_job()
    services.ack(unit.lease, Outcome.RETRY, error="boom\x00\ud800", logs=["nul\x00", "\udcff"])
    (record,) = services.errors(unit.lease.job_id)
    assert "boom" in record.error and "\x00" not in record.error
    assert len(record.logs) == 2 and all("\x00" not in line for line in record.logs)


BAD_LEASES = [None, "job", 3, ("only-id",), ("id", 1, 2), (1, 1), ("", 1), ("id", -1), ("id", 1.5),
              ("id", "1"), ("id", None), ("id", True), ("id", math.nan), ("x" * 65, 1)]
LEASE_WRITES = {
    "ack": lambda lease: services.ack(lease, Outcome.SUCCESS),
    "checkpoint": lambda lease: services.checkpoint(lease, {"s": 1}),
    "write_output": lambda lease: services.write_output(lease, 1),
    "write_progress": lambda lease: services.write_progress(lease, 1),
    "release": lambda lease: services.release(lease),
    "renew": lambda lease: services.renew([lease], 1000),
}


@pytest.mark.parametrize("lease", BAD_LEASES, ids=repr)
@pytest.mark.parametrize("write", list(LEASE_WRITES))
def test_bad_lease_refs_are_refused(store_clock, write, lease):
    running_job()
    error = refused(lambda: LEASE_WRITES[write](lease), "lease")
    assert error.field.startswith("lease")


@pytest.fixture
def unit(store_clock):
    return running_job()


def test_fenced_writes_refuse_bad_data(unit):
    refused(lambda: services.checkpoint(unit.lease, {"s": {1}}), "data")
    refused(lambda: services.checkpoint(unit.lease, math.nan), "data")
    refused(lambda: services.write_output(unit.lease, b"bytes"), "data")
    refused(lambda: services.write_output(unit.lease, {1: "a"}), "data")
    refused(lambda: services.write_progress(unit.lease, math.nan), "current")
    refused(lambda: services.write_progress(unit.lease, -1), "current")
    refused(lambda: services.write_progress(unit.lease, 1, math.inf), "total")
    refused(lambda: services.write_progress(unit.lease, 1, 2, message=3), "message")
    refused(lambda: services.write_progress(unit.lease, 1, 2, message="nul\x00"), "message")
    refused(lambda: services.renew([unit.lease], 0), "lease_ms")
    refused(lambda: services.renew([unit.lease], 10**17), "lease_ms")


def test_a_progress_message_over_the_limit_is_refused_and_nothing_is_written(unit):
    from boson_django.validation import MAX_PROGRESS_MESSAGE

    services.write_progress(unit.lease, 1, 10, "x" * MAX_PROGRESS_MESSAGE)
    error = refused(lambda: services.write_progress(unit.lease, 2, 10, "y" * 5_000_000), "message")
    assert f"5,000,000 characters, over the {MAX_PROGRESS_MESSAGE:,}" in str(error)
    refused(lambda: services.write_progress(unit.lease, 2, 10, "y" * (MAX_PROGRESS_MESSAGE + 1)), "message")
    stored = services.get_progress(unit.lease.job_id)
    assert (stored.current, stored.message) == (1, "x" * MAX_PROGRESS_MESSAGE)


# -- the other entry points ------------------------------------------------------------

BAD_CALLS = {
    "admit empty worker": (lambda: services.admit("", [], 1), "worker_id"),
    "admit empty queue name": (lambda: services.admit("w", [""], 1), "queues"),
    "admit negative limit": (lambda: services.admit("w", [], -1), "limit"),
    "admit huge lease": (lambda: services.admit("w", [], 1, lease_ms=10**17), "lease_ms"),
    "admit zero lease": (lambda: services.admit("w", [], 1, lease_ms=0), "lease_ms"),
    "promote negative limit": (lambda: services.promote_due(-1), "limit"),
    "reclaim NaN limit": (lambda: services.reclaim_expired(math.nan), "limit"),
    "evict string limit": (lambda: services.evict_retained("10"), "limit"),
    "claim_duty empty name": (lambda: services.claim_duty("", "h", 1000), "name"),
    "claim_duty empty holder": (lambda: services.claim_duty("d", "", 1000), "holder"),
    "claim_duty zero lease": (lambda: services.claim_duty("d", "h", 0), "lease_ms"),
    "claim_duty huge lease": (lambda: services.claim_duty("d", "h", 10**17), "lease_ms"),
    "release_duty empty name": (lambda: services.release_duty("", "h"), "name"),
    "release_duty None holder": (lambda: services.release_duty("d", None), "holder"),
    "pause empty queue": (lambda: services.pause_queue(""), "name"),
    "resume empty queue": (lambda: services.resume_queue(" "), "name"),
    "rate limit empty name": (lambda: services.set_rate_limit("", 1, 1000), "name"),
    "rate limit zero limit": (lambda: services.set_rate_limit("r", 0, 1000), "limit"),
    "rate limit zero window": (lambda: services.set_rate_limit("r", 1, 0), "window_ms"),
    "rate limit negative burst": (lambda: services.set_rate_limit("r", 1, 1000, -1), "burst"),
    "rate limit NaN limit": (lambda: services.set_rate_limit("r", math.nan, 1000), "limit"),
    "task config unknown field": (lambda: services.set_task_config(NOOP, max_actve=2), "max_actve"),
    "task config max_active 0": (lambda: services.set_task_config(NOOP, max_active=0), "max_active"),
    "task config weight NaN": (lambda: services.set_task_config(NOOP, weight=math.nan), "weight"),
    "task config priority 200": (lambda: services.set_task_config(NOOP, priority=200), "priority"),
    "task config empty queue": (lambda: services.set_task_config(NOOP, queue=""), "queue"),
    "task config empty task": (lambda: services.set_task_config("", max_active=1), "task"),
    "task config max_attempts 0": (lambda: services.set_task_config(NOOP, max_attempts=0), "max_attempts"),
    "task config max_attempts text": (lambda: services.set_task_config(NOOP, max_attempts="5"), "max_attempts"),
    "task config huge max_active": (lambda: services.set_task_config(NOOP, max_active=2**31), "max_active"),
    "task config negative retention": (lambda: services.set_task_config(NOOP, retention_ms=-1), "retention_ms"),
    "task config huge lease": (lambda: services.set_task_config(NOOP, lease_ms=10**17), "lease_ms"),
    "task config zero timeout": (lambda: services.set_task_config(NOOP, timeout_ms=0), "timeout_ms"),
    "task config crash_limit 0": (lambda: services.set_task_config(NOOP, crash_limit=0), "crash_limit"),
    "task config negative weight": (lambda: services.set_task_config(NOOP, weight=-1), "weight"),
    "task config bad uniqueness": (lambda: services.set_task_config(NOOP, uniqueness="sometimes"), "uniqueness"),
    "task config bad field beside a good one": (lambda: services.set_task_config(ADD, max_attempts=9, lease_ms=0), "lease_ms"),
    "rate limit huge window": (lambda: services.set_rate_limit("r", 1, 10**17), "window_ms"),
    "rate limit text burst": (lambda: services.set_rate_limit("r", 1, 1000, "5"), "burst"),
    "cancel empty id": (lambda: services.cancel(""), "id"),
    "retry None id": (lambda: services.retry(None), "id"),
    "release_quarantined int id": (lambda: services.release_quarantined(5), "id"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_other_entry_points_refuse_bad_input(store_clock, case):
    running_job()
    call, field = BAD_CALLS[case]
    refused(call, field)


def test_the_clock_refuses_bad_steps(store_clock):
    for bad in (-1, math.nan, math.inf):
        with pytest.raises(ValueError, match="ms"):
            clock.advance(bad)
    with pytest.raises(ValueError, match="aware"):
        clock.freeze(datetime(2030, 1, 1))
    assert clock.now() == store_clock.at


def test_good_edge_values_are_accepted(store_clock):
    far = datetime(2030, 1, 1, tzinfo=timezone.utc) + timedelta(days=365 * 50)
    results = services.enqueue([
        Envelope(task=NOOP, priority=100, weight=0, max_attempts=1, retention_ms=0),
        Envelope(task=NOOP, priority=-100, weight=1e6, lease_ms=1, run_at=far, queue="q" * 100),
        Envelope(task=NOOP, args=[None, True, 1, 1.5, "é", [], {}], kwargs={"ü": [1, {"x": None}]}),
        Envelope(task=NOOP, args=(1, 2)),
    ])
    assert [r.disposition for r in results] == ["created"] * 4
    unit = services.admit("w", [], 1)[0]
    assert services.ack(unit.lease, Outcome.SNOOZE, delay_ms=1) == "scheduled"


@pytest.mark.parametrize("size", [0, 199, 200, 201, 10_000])
def test_clipped_keeps_the_start_and_the_end_within_the_limit(size):
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    out = validation.clipped(text, 200)
    if size <= 200:
        assert out == text
        return
    head, marker, tail = out.split("\n")
    left = int(marker.removeprefix("[... ").removesuffix(" characters left out ...]"))
    assert len(out) <= 200 and text.startswith(head) and text.endswith(tail)
    assert len(head) + left + len(tail) == size



@pytest.mark.parametrize("field, value", [("queue", "emails\n"), ("queue", "\x1b[31mred"), ("rate_class", "smtp\t"),
                                          ("queue", "late\x85")])
def test_a_name_with_a_control_character_is_refused_by_name(store_clock, field, value):
    """A newline or an escape sequence in a name is a mistake, and would reach an
    operator's terminal (boson_status, the logs)."""
    error = refused(lambda: services.enqueue([Envelope(task=NOOP, **{field: value})]), field)
    assert "contains a control character" in str(error)


def test_a_key_may_hold_control_characters(store_clock):
    """A unique key or a fingerprint is often built from the job's own data."""
    [created] = services.enqueue([Envelope(task=NOOP, unique_key="line one\nline two", fingerprint="tab\there")])
    assert created.disposition == "created"


def test_an_unknown_task_is_refused_saying_why(store_clock):
    error = refused(lambda: services.enqueue([Envelope(task="tests.testapp.tasks.nope")]), "task")
    assert "module 'tests.testapp.tasks' has no 'nope'" in str(error)


@task()
def outside_the_apps() -> None:
    """Defined in this module, which no installed app holds."""


def test_a_task_outside_the_installed_apps_is_accepted(store_clock):
    """Any module-level task of a boson backend, as with Django's own backends (a
    worker imports its module when a job names it: tests/worker/test_task_resolution.py)."""
    [created] = services.enqueue([Envelope(task=outside_the_apps.module_path)])
    assert created.disposition == "created"
