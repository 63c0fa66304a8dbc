"""Pausing and resuming queues."""

from __future__ import annotations

from boson_django import services
from boson_django.models import Queue


def _queue(name: str) -> Queue:
    return Queue.objects.get(name=name)


def test_pause_stamps_the_store_time(store_clock):
    services.pause_queue("mail")
    assert _queue("mail").paused
    assert _queue("mail").paused_at == store_clock.now()


def test_pausing_a_paused_queue_keeps_the_first_pause_time(store_clock):
    services.pause_queue("mail")
    first = store_clock.now()
    store_clock.advance(60_000)
    services.pause_queue("mail")
    assert _queue("mail").paused
    assert _queue("mail").paused_at == first


def test_pausing_after_a_resume_stamps_the_new_pause(store_clock):
    services.pause_queue("mail")
    services.resume_queue("mail")
    store_clock.advance(60_000)
    services.pause_queue("mail")
    assert _queue("mail").paused_at == store_clock.now()


def test_resume_clears_the_pause(store_clock):
    services.pause_queue("mail")
    services.resume_queue("mail")
    assert not _queue("mail").paused
    assert _queue("mail").paused_at is None
