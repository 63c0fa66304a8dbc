"""Concurrent enqueues of one unique_key make one job, decided by the database."""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connection, transaction

from boson_django import services
from boson_django.models import Job
from tests.concurrency.support import run_threads
from tests.factories import NOOP, envelope

ENQUEUERS = 16


@pytest.mark.parametrize("key", ["report:1", "report:2", "report:3"])
def test_sixteen_concurrent_enqueues_of_one_key_make_one_job(live_clock, key):
    results = run_threads(ENQUEUERS, lambda i: services.enqueue([envelope(NOOP, unique_key=key, args=[i])])[0])

    created = [r for r in results if r.disposition == "created"]
    duplicates = [r for r in results if r.disposition == "duplicate"]
    assert len(created) == 1, results
    assert len(duplicates) == ENQUEUERS - 1
    assert {r.id for r in duplicates} == {created[0].id}
    assert list(Job.objects.filter(unique_key=key).values_list("id", flat=True)) == [created[0].id]


@pytest.mark.slow
@pytest.mark.postgres
def test_batches_sharing_keys_in_different_orders_neither_deadlock_nor_double(live_clock):
    """Each batch holds the same keys, shuffled its own way: inserted in key order, the
    batches wait on one another's keys in one order instead of deadlocking."""
    def shuffled(keys: list[str], i: int) -> list[str]:
        mine = keys[:]
        random.Random(i).shuffle(mine)
        return mine

    for round_ in range(40):
        keys = [f"shared:{round_}:{i}" for i in range(60)]
        results = run_threads(
            6, lambda i, keys=keys: services.enqueue([envelope(NOOP, unique_key=k) for k in shuffled(keys, i)])
        )
        holders = dict(Job.objects.filter(unique_key__in=keys).values_list("unique_key", "id"))
        assert len(holders) == 60
        for i, batch in enumerate(results):  # in the caller's order, each naming the key's one job
            assert [r.id for r in batch] == [holders[k] for k in shuffled(keys, i)]
        assert sum(r.disposition == "created" for batch in results for r in batch) == 60


def test_the_first_of_two_rows_with_one_key_in_a_batch_wins(live_clock):
    results = services.enqueue([envelope(NOOP, unique_key="b", args=[1]), envelope(NOOP, unique_key="a"),
                                envelope(NOOP, unique_key="b", args=[2])])
    assert [r.disposition for r in results] == ["created", "created", "duplicate"]
    assert results[2].id == results[0].id
    assert Job.objects.get(id=results[0].id).args == [1]


def test_a_rolled_back_key_holder_lets_the_next_enqueue_create(live_clock):
    with pytest.raises(RuntimeError), transaction.atomic():
        (held,) = services.enqueue([envelope(NOOP, unique_key="k")])
        assert held.disposition == "created"
        raise RuntimeError("the caller's transaction fails")

    (after,) = services.enqueue([envelope(NOOP, unique_key="k")])
    assert after.disposition == "created"
    assert after.id != held.id
    assert not Job.objects.filter(id=held.id).exists()
    assert list(Job.objects.filter(unique_key="k").values_list("id", flat=True)) == [after.id]


def _backend_pid(pids: list[int], known: threading.Event) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pids.append(cursor.fetchone()[0])
    known.set()


def _wait_until_blocked_on_a_lock(pids: list[int], known: threading.Event) -> None:
    """Poll pg_stat_activity (no time-based sleep) until the second backend waits for a lock."""
    assert known.wait(30)
    with connection.cursor() as cursor:
        for _ in range(100_000):
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pids[0]])
            row = cursor.fetchone()
            if row and row[0] == "Lock":
                return
    raise AssertionError("the second enqueue never waited on the first one's key")


def _second_enqueue_behind_an_uncommitted_holder(key: str, *, roll_back: bool) -> dict[str, object]:
    """A holder enqueues ``key`` in an open transaction; a second enqueue of ``key`` must
    block on it (seen in pg_locks) until the holder commits or rolls back."""
    holder_in, finish = threading.Event(), threading.Event()
    second_pid: list[int] = []
    pid_known = threading.Event()
    outcome: dict[str, object] = {}

    def holder() -> None:
        try:
            with transaction.atomic():
                outcome["held"] = services.enqueue([envelope(NOOP, unique_key=key)])[0]
                holder_in.set()
                assert finish.wait(30)
                transaction.set_rollback(roll_back)
        finally:
            connection.close()

    def second() -> None:
        try:
            assert holder_in.wait(30)
            _backend_pid(second_pid, pid_known)
            outcome["second"] = services.enqueue([envelope(NOOP, unique_key=key)])[0]
        finally:
            connection.close()

    threads = [threading.Thread(target=holder), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    assert holder_in.wait(30)
    try:
        _wait_until_blocked_on_a_lock(second_pid, pid_known)
        assert "second" not in outcome, "the second enqueue did not wait for the uncommitted holder"
    finally:
        finish.set()
    for thread in threads:
        thread.join(30)
    return outcome


@pytest.mark.postgres
def test_an_enqueue_waiting_on_an_uncommitted_holder_creates_when_it_rolls_back(live_clock):
    """The second enqueue blocks on the first's uncommitted key, then creates once it rolls back."""
    outcome = _second_enqueue_behind_an_uncommitted_holder("k2", roll_back=True)
    assert outcome["second"].disposition == "created"
    assert not Job.objects.filter(id=outcome["held"].id).exists()
    assert list(Job.objects.filter(unique_key="k2").values_list("id", flat=True)) == [outcome["second"].id]


@pytest.mark.postgres
def test_an_enqueue_waiting_on_an_uncommitted_holder_is_a_duplicate_when_it_commits(live_clock):
    outcome = _second_enqueue_behind_an_uncommitted_holder("k3", roll_back=False)
    assert outcome["second"].disposition == "duplicate"
    assert outcome["second"].id == outcome["held"].id
    assert Job.objects.filter(unique_key="k3").count() == 1
