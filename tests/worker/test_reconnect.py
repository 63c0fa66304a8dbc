"""The wait between reconnect attempts: doubling, capped, bounded by the leases held,
jittered so that workers do not come back in lockstep."""

from __future__ import annotations

import random

from boson_django.worker.reconnect import Reconnect, wait_bound


def test_the_wait_doubles_up_to_the_cap():
    assert [wait_bound(n, 30.0, None) for n in range(1, 11)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]


def test_the_wait_is_at_most_a_quarter_of_the_time_left_on_the_shortest_lease():
    assert wait_bound(9, 30.0, 8.0) == 2.0
    assert wait_bound(1, 30.0, 8.0) == 0.1
    assert wait_bound(9, 30.0, -3.0) == 0.02  # a lease thought lapsed: try again soon, never in a spin


def test_each_wait_is_jittered_between_half_and_all_of_its_bound_and_workers_differ():
    workers = [Reconnect(30_000, rng=random.Random(seed)) for seed in range(20)]
    error = ConnectionRefusedError("connection refused")
    for attempt in range(1, 8):
        waits = [w.failed(error, lease_left_s=20.0) for w in workers]
        bound = wait_bound(attempt, 30.0, 20.0)
        assert all(bound / 2 <= wait <= bound for wait in waits), (attempt, waits)
        assert len({round(wait, 6) for wait in waits}) == len(waits)  # no two in lockstep
