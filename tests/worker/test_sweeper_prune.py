"""Workers prune the dashboard's throughput counters under their own duty."""

from datetime import timedelta

from boson_django.models import ThroughputMinute
from boson_django.worker.sweeper import Sweeper


def test_sweeper_prunes_counters_older_than_two_days(store_clock):
    now = store_clock.now()
    old = ThroughputMinute.objects.create(minute=now - timedelta(days=2, minutes=1), queue="q", outcome="completed", count=3)
    recent = ThroughputMinute.objects.create(minute=now - timedelta(hours=47), queue="q", outcome="completed", count=5)
    done = Sweeper("w1", "default", interval_ms=1000, batch=100).run()
    assert done["boson.prune"] == 1
    assert not ThroughputMinute.objects.filter(id=old.id).exists()
    assert ThroughputMinute.objects.filter(id=recent.id).exists()


def test_a_pruning_duty_held_elsewhere_is_left_alone(store_clock):
    from boson_django import services

    assert services.claim_duty("boson.prune", "other-node", 60_000)
    done = Sweeper("w1", "default", interval_ms=1000, batch=100).run()
    assert done["boson.prune"] is None
