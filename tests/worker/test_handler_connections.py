"""A handler's own database connection is closed after its job (``CONN_MAX_AGE = 0``),
as Django closes a request's: the pool thread keeps nothing open between jobs."""

from __future__ import annotations

from django.db import connections

from tests.testapp import tasks
from tests.worker.conftest import burst, state


def test_a_handlers_connection_is_closed_after_each_job(live_clock):
    assert connections["default"].settings_dict.get("CONN_MAX_AGE", 0) == 0
    tasks.SEEN_CONNECTIONS.clear()
    ids = [tasks.reads_store.enqueue().id for _ in range(4)]
    burst("--concurrency", "1")
    assert {state(i) for i in ids} == {"completed"}
    assert len(tasks.SEEN_CONNECTIONS) == 4
    assert all(c.connection is None for c in tasks.SEEN_CONNECTIONS)  # closed after each job
