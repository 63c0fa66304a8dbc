"""Deleting a rate class's bucket and an idle queue's row."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.models import Bucket, Job, Queue
from tests.factories import SEND_MAIL, admit_one, enqueue_one
from tests.services.support import job_row


def _mails(n: int) -> list[str]:
    return [enqueue_one(SEND_MAIL, args=[f"{i}@x"], queue="mail") for i in range(n)]


def test_a_deleted_bucket_leaves_its_class_unlimited_at_the_next_admission(store_clock):
    services.set_rate_limit("smtp", limit=2, window_ms=60_000)  # one send_mail (weight 2) a minute
    _mails(3)
    admit_one(queues=["mail"])
    assert services.admit("w1", ["mail"], 2) == []
    assert services.delete_rate_limit("smtp") is True
    units = services.admit("w1", ["mail"], 2)
    assert len(units) == 2
    assert [job_row(u.lease.job_id)["charged_weight"] for u in units] == [0.0, 0.0]  # nothing charged
    assert services.bucket_tokens("smtp") is None
    assert not Bucket.objects.filter(name="smtp").exists()


def test_a_job_running_when_its_bucket_went_acks_without_one(store_clock):
    services.set_rate_limit("smtp", limit=4, window_ms=60_000)
    (job_id,) = _mails(1)
    unit = admit_one(queues=["mail"])
    services.delete_rate_limit("smtp")
    services.ack(unit.lease, services.Outcome.SUCCESS, actual_weight=0)
    assert Job.objects.get(id=job_id).state == "completed"
    assert not Bucket.objects.filter(name="smtp").exists()


def test_a_bucket_set_again_after_the_delete_starts_full(store_clock):
    services.set_rate_limit("smtp", limit=2, window_ms=60_000)
    _mails(1)
    admit_one(queues=["mail"])
    services.delete_rate_limit("smtp")
    services.set_rate_limit("smtp", limit=2, window_ms=60_000)
    assert services.bucket_tokens("smtp") == 2


def test_deleting_a_bucket_that_is_not_there_is_false(db):
    assert services.delete_rate_limit("smtp") is False


def test_deleting_a_bucket_checks_the_name(db):
    with pytest.raises(ValueError, match="name"):
        services.delete_rate_limit("")


def test_an_idle_queue_is_deleted_and_comes_back_unpaused_with_its_next_job(store_clock):
    services.pause_queue("mail")
    services.resume_queue("mail")
    assert services.reason_to_keep_queue("mail") is None
    assert services.delete_queue("mail") is True
    assert not Queue.objects.filter(name="mail").exists()
    _mails(1)
    assert Queue.objects.get(name="mail").paused is False


def test_a_queue_that_jobs_name_is_kept(store_clock):
    (job_id,) = _mails(1)
    unit = admit_one(queues=["mail"])
    services.ack(unit.lease, services.Outcome.SUCCESS)  # retained: a finished job names it too
    assert services.reason_to_keep_queue("mail") == "jobs are still in it"
    assert services.delete_queue("mail") is False
    assert Queue.objects.filter(name="mail").exists()


def test_a_paused_queue_is_kept(store_clock):
    services.pause_queue("mail")
    assert services.reason_to_keep_queue("mail") == "it is paused (resume it first)"
    assert services.delete_queue("mail") is False
    assert Queue.objects.get(name="mail").paused


def test_deleting_a_queue_that_is_not_there_is_false(db):
    assert services.reason_to_keep_queue("mail") == "no such queue"
    assert services.delete_queue("mail") is False
