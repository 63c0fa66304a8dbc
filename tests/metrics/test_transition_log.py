"""One structured record per transition, after commit; nothing when nobody listens."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction

from boson_django import services, transitions
from boson_django.services import Outcome
from tests.factories import NOOP, envelope


@pytest.fixture
def transition_log(caplog):
    """The logger given a level of its own (caplog restores NOTSET afterwards)."""
    caplog.set_level(logging.INFO, logger="boson_django.transitions")
    return caplog


def _fields(caplog) -> list[tuple]:
    return [(r.event, r.job_id, r.queue, r.task, r.fence, r.outcome, r.state)
            for r in caplog.records if r.name == "boson_django.transitions"]


def test_each_transition_is_one_record_with_job_queue_task_fence_outcome(transition_log, live_clock):
    (created,) = services.enqueue([envelope(NOOP, queue="logged")])
    (unit,) = services.admit("w", ["logged"], 1)
    services.ack(unit.lease, Outcome.RETRY, error="boom")
    assert _fields(transition_log) == [
        ("enqueued", created.id, "logged", NOOP, 0, None, "available"),
        ("admitted", created.id, "logged", NOOP, 1, None, "running"),
        ("acked", created.id, "logged", NOOP, 1, "retry", "retryable"),
    ]
    assert transition_log.records[-1].getMessage().startswith(f"acked job {created.id} ({NOOP}, queue logged, fence 1)")


def test_a_graceful_release_is_a_transition_too(transition_log, live_clock):
    (created,) = services.enqueue([envelope(NOOP, queue="logged")])
    (unit,) = services.admit("w", ["logged"], 1)
    services.release(unit.lease)
    assert _fields(transition_log)[-1] == ("released", created.id, "logged", NOOP, 1, "released", "available")


def test_a_rolled_back_enqueue_logs_nothing(transition_log, live_clock):
    with pytest.raises(RuntimeError), transaction.atomic():
        services.enqueue([envelope(NOOP, queue="logged")])
        raise RuntimeError("the request failed")
    assert _fields(transition_log) == []


def test_nothing_is_built_when_nobody_listens(live_clock, monkeypatch):
    monkeypatch.setattr(transitions, "_observers", [])  # the metrics counters may be subscribed
    assert not transitions.active()
    monkeypatch.setattr(transitions, "emit", lambda *a, **k: pytest.fail("built records nobody reads"))
    services.enqueue([envelope(NOOP)])
