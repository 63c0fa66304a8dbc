"""Fault scenarios: real worker processes, the frozen store clock, a checker at the end."""

from __future__ import annotations

import pytest

from tests.faults.support import Worker


@pytest.fixture
def workers(tmp_path):
    """Start workers with ``workers(name, *args)``; any still alive are killed at the end."""
    started: list[Worker] = []

    def start(name: str, *args: str, env=None) -> Worker:
        worker = Worker(tmp_path, name, *args, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.cleanup()
