"""A handler's own database connection is closed after its job (``CONN_MAX_AGE = 0``),
as Django closes a request's: the pool thread keeps nothing open between jobs."""

from __future__ import annotations

import pytest
from django.db import connections

from boson_django import services
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


@pytest.mark.parametrize("leaks", ["leaves_atomic_open", "async_leaves_atomic_open"])
def test_a_transaction_a_handler_leaves_open_fails_its_job_and_not_the_next_ones_on_its_thread(live_clock, leaks):
    """Each later job on the thread -- its queries and its context's fenced writes --
    failed on the connection Django still believed to be inside that transaction (for
    async handlers, asgiref's thread, which runs the ``sync_to_async`` calls of all)."""
    leaker = getattr(tasks, leaks).enqueue()
    later = [tasks.reads_store.enqueue().id, tasks.inspect_context.enqueue("after").id,
             tasks.async_reads_store.enqueue().id]
    burst("--concurrency", "1")  # one thread runs them all, the leaker first
    assert [state(i) for i in later] == ["completed"] * 3
    assert state(leaker.id) == "retryable"
    (record,) = services.errors(leaker.id)
    assert record.error.startswith("boson_django.worker.outcomes.TransactionLeftOpen: the handler returned inside "
                                   "a transaction it never closed (database 'default'); its writes were rolled back")
