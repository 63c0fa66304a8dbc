"""``taskresults.send`` calls the receivers ``Signal.send`` would, while it keeps them
between sends: a receiver connected, disconnected or gone since is honoured at once."""

from __future__ import annotations

import gc

import pytest

from boson_django import registry, taskresults
from boson_django.compat import task_finished, task_started
from tests.factories import ADD


def _result():
    return taskresults.enqueued_result(registry.get(ADD), "job-1", {
        "state": "available", "task": ADD, "enqueued_at": None, "args": "[]", "kwargs": "{}",
    }, "default")


pytestmark = pytest.mark.django_db


def test_connected_and_disconnected_receivers_are_honoured_between_sends():
    seen: list[str] = []

    def first(sender, task_result, **kwargs):
        seen.append("first")

    def second(sender, task_result, **kwargs):
        seen.append("second")

    result = _result()
    task_started.connect(first)
    try:
        taskresults.send(task_started, result)
        assert seen == ["first"]
        task_started.connect(second)
        taskresults.send(task_started, result)
        assert seen == ["first", "first", "second"]
        task_started.disconnect(first)
        task_started.disconnect(second)
        task_started.connect(first)  # same length as before: still noticed
        taskresults.send(task_started, result)
        assert seen == ["first", "first", "second", "first"]
    finally:
        task_started.disconnect(first)
        task_started.disconnect(second)
    taskresults.send(task_started, result)
    assert seen == ["first", "first", "second", "first"]


def test_a_receiver_only_weakly_referenced_stops_when_it_is_gone():
    seen: list[str] = []

    class Listener:
        def on_finished(self, sender, task_result, **kwargs):
            seen.append(task_result.id)

    listener = Listener()
    task_finished.connect(listener.on_finished)
    result = _result()
    taskresults.send(task_finished, result)
    assert seen == ["job-1"]
    del listener
    gc.collect()
    taskresults.send(task_finished, result)
    taskresults.send(task_finished, result)
    assert seen == ["job-1"]


def test_a_receiver_for_another_sender_is_not_called():
    seen: list[str] = []

    def other(sender, task_result, **kwargs):
        seen.append("other")

    task_started.connect(other, sender=int)
    try:
        taskresults.send(task_started, _result())
        assert seen == []
    finally:
        task_started.disconnect(other, sender=int)


def test_async_receivers_are_run_by_the_signal_itself():
    seen: list[str] = []

    async def on_started(sender, task_result, **kwargs):
        seen.append("async")

    def plain(sender, task_result, **kwargs):
        seen.append("sync")

    task_started.connect(plain)
    task_started.connect(on_started)
    try:
        taskresults.send(task_started, _result())
        assert seen == ["sync", "async"]
    finally:
        task_started.disconnect(on_started)
        task_started.disconnect(plain)
