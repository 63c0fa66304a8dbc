"""What an attempt's log capture keeps: the handler's lines, not the Tasks framework's."""

from __future__ import annotations

import logging

import pytest

from boson_django.worker import logcapture


@pytest.fixture
def installed():
    logcapture.install(logging.INFO)
    yield
    logcapture.uninstall()


def test_the_handler_s_lines_are_kept_and_the_framework_s_lifecycle_lines_are_not(installed):
    loggers = [logging.getLogger(name) for name in ("django.tasks", "django_tasks", "shop.tasks")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)  # as Django 6's default logging lets django.tasks through
    try:
        with logcapture.capturing() as buffer:
            loggers[0].info("Task id=1 path=shop.tasks.x state=RUNNING")
            loggers[1].info("Task id=1 path=shop.tasks.x state=RUNNING")
            loggers[2].info("charging order 7")
        lines = buffer.collect()
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    assert len(lines) == 1 and lines[0].endswith("INFO shop.tasks: charging order 7"), lines
