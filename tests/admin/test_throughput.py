"""The throughput counter: every finished attempt counts at ack, deleted jobs included."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from boson_django import services
from boson_django.models import ThroughputMinute
from boson_django.services import Outcome, throughput
from tests.factories import admit_one, enqueue_one

pytestmark = pytest.mark.django_db


def _counted() -> dict[str, int]:
    rows = ThroughputMinute.objects.values("outcome").annotate(n=Sum("count"))
    return {row["outcome"]: row["n"] for row in rows}


def test_success_retry_skip_and_discard_each_count(store_clock):
    for outcome in (Outcome.SUCCESS, Outcome.RETRY, Outcome.SKIP, Outcome.DISCARD):
        enqueue_one(queue="tp", max_attempts=3)
        services.ack(admit_one(queues=["tp"]).lease, outcome)
    assert _counted() == {"completed": 1, "retried": 1, "skipped": 1, "failed": 1}


def test_a_job_deleted_at_ack_still_counts(store_clock):
    job_id = enqueue_one(queue="tp", retention_ms=0)
    services.ack(admit_one(queues=["tp"]).lease, Outcome.SUCCESS)
    assert services.job_state(job_id) is None
    assert _counted() == {"completed": 1}


def test_the_last_retry_counts_as_failed(store_clock):
    enqueue_one(queue="tp", max_attempts=1)
    services.ack(admit_one(queues=["tp"]).lease, Outcome.RETRY, error="boom")
    assert _counted() == {"failed": 1}


def test_snooze_rate_limited_and_revoke_finish_no_attempt(store_clock):
    for outcome, extra in ((Outcome.SNOOZE, {"delay_ms": 10}), (Outcome.RATE_LIMITED, {}), (Outcome.REVOKE, {})):
        enqueue_one(queue=f"tp-{outcome.value}")
        services.ack(admit_one(queues=[f"tp-{outcome.value}"]).lease, outcome, **extra)
    assert _counted() == {}


def test_the_wait_lands_in_its_log2_bucket(store_clock):
    enqueue_one(queue="tp")
    store_clock.advance(1000)  # due at enqueue, admitted a second later
    services.ack(admit_one(queues=["tp"]).lease, Outcome.SUCCESS)
    row = ThroughputMinute.objects.get()
    assert row.wait_bucket == throughput.wait_bucket(1000) == 9
    assert row.minute == store_clock.now().replace(second=0, microsecond=0)


def test_prune_drops_rows_older_than_two_days(store_clock):
    enqueue_one(queue="tp")
    services.ack(admit_one(queues=["tp"]).lease, Outcome.SUCCESS)
    store_clock.advance(2 * 24 * 3600 * 1000 + 60_000)
    assert throughput.prune_throughput() == 1
    assert not ThroughputMinute.objects.exists()
