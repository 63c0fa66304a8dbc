"""Fault scenarios: real worker processes, the frozen store clock, a checker at the end."""

from __future__ import annotations

import pytest

from tests.faults.support import Worker


@pytest.fixture
def workers(tmp_path):
    """Start workers with ``workers(name, *args)``; any still alive are killed at the end."""
    started: list[Worker] = []

    def start(name: str, *args: str, env=None, default_id: bool = False) -> Worker:
        worker = Worker(tmp_path, name, *args, env=env, default_id=default_id)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.cleanup()


@pytest.fixture
def proxy():
    """A :class:`~tests.faults.proxy.Proxy` in front of the test database (PostgreSQL);
    ``proxied_env(proxy, **boson)`` points a worker at it."""
    from django.db import connection

    from tests.faults.proxy import Proxy

    settings = connection.settings_dict
    front = Proxy(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))
    yield front
    front.close()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "pg_restart: restarts the shared PostgreSQL server; runs only with BOSON_PG_RESTART=1",
    )


def pytest_collection_modifyitems(config, items):
    import os

    if os.environ.get("BOSON_PG_RESTART") == "1":
        return
    skip = pytest.mark.skip(reason="restarts the PostgreSQL server; set BOSON_PG_RESTART=1 to run it")
    for item in items:
        if "pg_restart" in item.keywords:
            item.add_marker(skip)
