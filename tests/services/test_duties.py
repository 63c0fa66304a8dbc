"""SPEC section 3's duties on the store clock, one process: ``claim_duty`` is a
compare-and-set (only the holder extends, anyone takes an expired duty), ``release_duty``
expires it at once for its holder and changes nothing for anyone else. The race of many
claimers at one instant is in tests/concurrency/test_sweeps_duties.py."""

from __future__ import annotations

from datetime import timedelta

from boson_django import services
from boson_django.models import Duty


def _row(name: str) -> dict:
    return Duty.objects.filter(name=name).values().get()


def test_release_by_a_non_holder_raises_nothing_and_changes_nothing(store_clock):
    assert services.claim_duty("sweep", "node-a", 5_000) is True
    before = _row("sweep")
    assert services.release_duty("sweep", "node-b") is None
    assert services.release_duty("no-such-duty", "node-b") is None
    assert _row("sweep") == before
    assert not Duty.objects.filter(name="no-such-duty").exists()
    assert services.claim_duty("sweep", "node-b", 5_000) is False


def test_release_by_the_holder_frees_it_at_once(store_clock):
    assert services.claim_duty("sweep", "node-a", 5_000) is True
    services.release_duty("sweep", "node-a")
    assert _row("sweep")["expires_at"] == store_clock.now()
    assert services.claim_duty("sweep", "node-b", 5_000) is True
    assert _row("sweep")["holder"] == "node-b"


def test_the_holder_extends_keeping_its_claim_time_and_expiry_is_store_time(store_clock):
    assert services.claim_duty("sweep", "node-a", 5_000) is True
    claimed = store_clock.now()
    store_clock.advance(4_000)
    assert services.claim_duty("sweep", "node-a", 5_000) is True  # extended to 9,000 ms
    row = _row("sweep")
    assert row["claimed_at"] == claimed and row["expires_at"] == claimed + timedelta(milliseconds=9_000)
    store_clock.advance(4_999)
    assert services.claim_duty("sweep", "node-b", 5_000) is False  # 1 ms before the extended expiry
    store_clock.advance(1)
    assert services.claim_duty("sweep", "node-b", 5_000) is True
    assert _row("sweep")["claimed_at"] == store_clock.now()
