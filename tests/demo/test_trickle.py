"""The live demo's trickle, read without running it: ``batch(tick)`` is a pure function of
the tick, ``due`` says which ticks a moment makes due, ``Trickle.pour`` enqueues each
due tick once."""

from __future__ import annotations

from collections import Counter

import pytest


@pytest.fixture(scope="module")
def trickle(example_on_path):
    from shop import mail, partner
    from shop.demo import trickle

    return trickle, mail, partner


def _minute(trickle, first: int = 0) -> list:
    return [call for tick in range(first, first + 60) for call in trickle.batch(tick)]


def test_a_few_jobs_a_second_every_second(trickle):
    trickle, _, _ = trickle
    sizes = [len(trickle.batch(tick)) for tick in range(600)]
    assert min(sizes) >= 3 and max(sizes) <= 6
    assert 3.5 <= sum(sizes) / len(sizes) <= 4.5


def test_a_minute_holds_every_kind_of_job_the_docstring_says(trickle):
    trickle, mail, partner = trickle
    calls = _minute(trickle, first=60)
    tasks = Counter(call.task for call in calls)
    assert tasks == {"send_order_email": 132, "sync_partner_order": 60, "make_thumbnail": 30,
                     "rebuild_search_index": 6, "build_sales_report": 3, "import_supplier_feed": 2}
    emails = [call for call in calls if call.task == "send_order_email"]
    assert sum(call.args[1].endswith(mail.BOUNCING_DOMAIN) for call in emails) == 6
    assert sum(call.delay_s == trickle.FOLLOW_UP_S for call in emails) == 12
    assert not any(call.delay_s and call.args[1].endswith(mail.BOUNCING_DOMAIN) for call in emails)
    kinds = Counter(partner.kind_of(call.args[0]) for call in calls if call.task == "sync_partner_order")
    assert kinds["down"] == 6 and kinds["flaky"] > 0 and kinds["throttled"] > 0 and kinds["ok"] > 0
    assert all(call.args[1] == trickle.BIG_SIZES for call in calls if call.task == "make_thumbnail")


def test_failures_come_within_the_first_ten_seconds(trickle):
    """Whoever logs in soon finds a bounced email (fails at once) and an order the partner
    never takes (fails once its attempts are spent) already enqueued."""
    trickle, mail, partner = trickle
    first = [call for tick in range(10) for call in trickle.batch(tick)]
    assert any(c.task == "send_order_email" and c.args[1].endswith(mail.BOUNCING_DOMAIN) for c in first)
    assert any(c.task == "sync_partner_order" and partner.kind_of(c.args[0]) == "down" for c in first)


def test_no_two_jobs_share_an_order_image_or_month(trickle):
    """Each order email, partner sync, thumbnail and report is a new job (a repeat would
    be one job twice, not a trickle); follow-ups repeat an order's email on purpose."""
    trickle, _, _ = trickle
    calls = [call for tick in range(3600) for call in trickle.batch(tick) if not call.delay_s]
    for task in ("send_order_email", "sync_partner_order", "make_thumbnail", "build_sales_report", "import_supplier_feed"):
        keys = [call.args[0] for call in calls if call.task == task]
        assert len(keys) == len(set(keys)), task
    months = [call.args[0] for call in calls if call.task == "build_sales_report"]
    assert months[:2] == ["2030-02", "2030-03"] and months[11] == "2031-01"


def test_the_same_tick_gives_the_same_batch(trickle):
    trickle, _, _ = trickle
    assert trickle.batch(42) == trickle.batch(42) and trickle.batch(42) != trickle.batch(43)


@pytest.mark.parametrize("next_tick, elapsed_s, ticks", [
    (0, 0.0, [0]),
    (1, 0.9, []),
    (1, 3.2, [1, 2, 3]),
    (4, 4.0, [4]),
    (5, 100.5, [96, 97, 98, 99, 100]),  # after a stall, only the last MAX_CATCH_UP ticks
])
def test_due_ticks(trickle, next_tick, elapsed_s, ticks):
    trickle, _, _ = trickle
    assert list(trickle.due(next_tick, elapsed_s)) == ticks


def test_pour_enqueues_each_due_tick_once(trickle, monkeypatch):
    trickle, _, _ = trickle
    enqueued = []
    monkeypatch.setattr(trickle, "enqueue", enqueued.append)
    pouring = trickle.Trickle()
    poured = [pouring.pour(elapsed) for elapsed in (0.0, 0.5, 2.1, 2.9, 3.0)]
    assert enqueued == [call for tick in range(4) for call in trickle.batch(tick)]
    assert poured[1] == poured[3] == 0 and sum(poured) == pouring.enqueued == len(enqueued)
