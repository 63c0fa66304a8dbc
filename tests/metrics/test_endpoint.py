"""The scrape endpoint: every documented metric, with its labels; cardinality bounded."""

from __future__ import annotations

import socket
import urllib.request
from datetime import timedelta

import pytest
from django.core.management import call_command

from boson_django import services
from boson_django.metrics import REGISTRY, install
from boson_django.schedules import run_now, sync_schedules
from boson_django.services import Outcome
from boson_django.states import JobState
from tests.factories import ADD, NOOP, envelope
from tests.metrics.support import documented, family_of, run_jobs, samples_of, scrape

pytestmark = pytest.mark.urls("tests.metrics.urls")


def _a_busy_store(live_clock, settings) -> None:
    install()
    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"minutely": {"task": NOOP, "cron": "* * * * *"}}}
    sync_schedules()
    run_now("minutely")
    services.set_rate_limit("smtp", 10, 60_000, 0)
    services.claim_duty("boson.reclaim", "w-1", 60_000)
    run_jobs(12)
    services.set_task_config(ADD, crash_limit=1)
    services.enqueue([envelope(ADD, queue="poison", args=[9, 9], lease_ms=1_000), envelope(NOOP, queue="slow", lease_ms=1_000)])
    services.admit("w-doomed", ["poison", "slow"], 2)
    live_clock.advance(1_000)
    services.reclaim_expired(10)
    services.pause_queue("slow")


def test_every_documented_metric_is_scraped_with_its_labels(client, live_clock, settings):
    _a_busy_store(live_clock, settings)
    series, types = scrape(client)
    docs = documented()
    assert len(docs) >= 20, "the docs table lists the metrics"
    for metric, (kind, labels) in docs.items():
        scraped_kind = types.get(family_of(metric, kind))
        assert scraped_kind == kind, f"{metric}: documented {kind}, scraped {scraped_kind}"
        samples = samples_of(series, metric, kind)
        assert samples, f"{metric} is documented but has no sample"
        assert all(set(s) - {"le"} == labels for s in samples), f"{metric}: labels {samples[0]} != {labels}"
    scraped = {f for f in types if f.startswith("boson_") and not f.endswith("_created")}  # client's _created samples
    undocumented = scraped - {family_of(m, k) for m, (k, _) in docs.items()}
    assert not undocumented, f"scraped but not in docs/metrics.md: {undocumented}"


def test_values_follow_the_store(client, live_clock, settings):
    _a_busy_store(live_clock, settings)
    series, _ = scrape(client)
    assert series[("boson_jobs", (("queue", "metered"), ("state", "completed")))] >= 1
    assert series[("boson_jobs", (("queue", "poison"), ("state", "quarantined")))] == 1
    assert series[("boson_queue_paused", (("queue", "slow"),))] == 1
    assert series[("boson_bucket_tokens", (("rate_class", "smtp"),))] == 10
    assert series[("boson_duty_held", (("duty", "boson.reclaim"),))] == 1
    assert series[("boson_duty_holder_info", (("duty", "boson.reclaim"), ("holder", "w-1")))] == 1
    assert series[("boson_schedule_next_run_timestamp_seconds", (("schedule", "minutely"),))] == (
        live_clock.at + timedelta(minutes=1)).timestamp()
    assert series[("boson_store_up", ())] == 1


def test_counters_count_this_processs_transitions(client, live_clock):
    client.get("/metrics/")  # installs the counters
    before = {k: REGISTRY.get_sample_value(k, {"queue": "counted"}) or 0 for k in ("boson_admissions_total", "boson_enqueued_total")}
    ok_before = REGISTRY.get_sample_value("boson_outcomes_total", {"queue": "counted", "outcome": "success"}) or 0
    (job,) = services.enqueue([envelope(NOOP, queue="counted")])
    live_clock.advance(1_500)
    (unit,) = services.admit("w", ["counted"], 1)
    live_clock.advance(2_000)
    services.ack(unit.lease, Outcome.SUCCESS)
    assert REGISTRY.get_sample_value("boson_enqueued_total", {"queue": "counted"}) == before["boson_enqueued_total"] + 1
    assert REGISTRY.get_sample_value("boson_admissions_total", {"queue": "counted"}) == before["boson_admissions_total"] + 1
    assert REGISTRY.get_sample_value("boson_outcomes_total", {"queue": "counted", "outcome": "success"}) == ok_before + 1
    assert REGISTRY.get_sample_value("boson_wait_seconds_sum", {"queue": "counted"}) >= 1.5
    assert REGISTRY.get_sample_value("boson_attempt_duration_seconds_bucket", {"queue": "counted", "le": "2.5"}) >= 1


def test_label_cardinality_does_not_grow_with_job_count(client, live_clock):
    run_jobs(20)
    first, _ = scrape(client)
    run_jobs(200)
    second, _ = scrape(client)
    assert set(second) == set(first), f"new series: {sorted(set(second) - set(first))[:5]}"
    job_ids = {e.id for e in services.all_enqueued()}
    assert not {v for _, labels in second for _, v in labels} & job_ids, "a job id became a label"


def test_the_endpoint_answers_get_only(client, db):
    assert client.post("/metrics/").status_code == 405


def test_boson_worker_serves_metrics_on_its_port(live_clock):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    services.enqueue([envelope(NOOP, queue="ported")])
    call_command("boson_worker", "--burst", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1",
                 "--queue", "ported", verbosity=0)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'boson_outcomes_total{outcome="success",queue="ported"} 1.0' in body
    assert 'boson_jobs{queue="ported",state="completed"} 1.0' in body


def test_serve_listens_on_the_address_given():
    from boson_django.metrics import serve

    server, _ = serve(0, "127.0.0.1")
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.shutdown()
        server.server_close()


def test_serve_listens_on_loopback_unless_told_otherwise():
    from boson_django.metrics import serve

    server, _ = serve(0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_scrape_of_named_families_is_served_too(transactional_db):
    """``?name[]=`` (prometheus-client's filter) goes through the one-read-at-a-time lock too."""
    from boson_django.metrics import serve

    server, _ = serve(0)
    try:
        services.enqueue([envelope(NOOP, queue="named")])
        port = server.server_address[1]
        url = f"http://127.0.0.1:{port}/metrics?name[]=boson_enqueued_total"
        body = urllib.request.urlopen(url, timeout=10).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'boson_enqueued_total{queue="named"}' in body and "boson_jobs" not in body


def test_a_metrics_port_in_use_or_a_bad_address_is_a_clear_error(db):
    from django.core.management.base import CommandError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=f"--metrics-port {port} --metrics-addr 127.0.0.1: cannot listen there"):
            call_command("boson_worker", "--burst", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1", verbosity=0)
    with pytest.raises(CommandError, match="--metrics-addr no-such-host.invalid: cannot listen there"):
        call_command("boson_worker", "--burst", "--metrics-port", str(port), "--metrics-addr", "no-such-host.invalid", verbosity=0)


def test_a_metrics_address_without_a_port_is_a_usage_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--metrics-addr needs --metrics-port") as raised:
        call_command("boson_worker", "--burst", "--metrics-addr", "127.0.0.1", verbosity=0)
    assert raised.value.returncode == 2


def test_a_metrics_port_out_of_range_is_a_usage_error(db):
    from django.core.management.base import CommandError

    # Past 65535 the bind raised OverflowError: a traceback naming no option.
    with pytest.raises(CommandError, match="--metrics-port: must be a port number from 1 to 65535, got '70000'"):
        call_command("boson_worker", "--burst", "--metrics-port", "70000", verbosity=0)


def test_a_metrics_port_without_the_metrics_extra_is_a_clear_error(db, monkeypatch):
    import sys

    from django.core.management.base import CommandError

    # prometheus-client not installed: the worker stopped with an ImproperlyConfigured traceback.
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "boson_django.metrics")
    with pytest.raises(CommandError, match=r"--metrics-port: .*pip install 'boson-django\[metrics\]'"):
        call_command("boson_worker", "--burst", "--metrics-port", "9108", verbosity=0)


def test_a_queue_s_job_gauges_drop_to_zero_instead_of_vanishing(client, live_clock):
    """Every queue has a ``boson_jobs`` series per state: retrying a queue's last failed
    job brings its failed series to 0, where a graph or ``sum by (queue)`` can see it."""
    services.enqueue([envelope(NOOP, queue="emptied", max_attempts=1)])
    (unit,) = services.admit("w-1", ["emptied"], 1)
    services.ack(unit.lease, Outcome.RETRY, error="E")
    series, _ = scrape(client)
    assert series[("boson_jobs", (("queue", "emptied"), ("state", "failed")))] == 1
    assert services.retry(unit.lease.job_id)
    series, _ = scrape(client)
    assert series.get(("boson_jobs", (("queue", "emptied"), ("state", "failed")))) == 0
    assert series.get(("boson_jobs", (("queue", "emptied"), ("state", "available")))) == 1
    assert {state for (name, labels) in series if name == "boson_jobs" and labels[0] == ("queue", "emptied")
            for state in [labels[1][1]]} == {s.value for s in JobState}


def test_a_queue_with_jobs_but_no_queue_row_has_every_gauge(client, live_clock):
    """A job whose enqueue commits while its idle queue's row is deleted sits in a queue
    with no row (``services.delete_queue``); it is admitted all the same. Its queue had no
    oldest-available age (so no backlog alert) and only the states it had jobs in."""
    from boson_django.models import Queue

    services.enqueue([envelope(NOOP, queue="rowless")])
    Queue.objects.filter(name="rowless").delete()
    live_clock.advance(400_000)
    series, _ = scrape(client)
    assert series[("boson_queue_oldest_available_age_seconds", (("queue", "rowless"),))] == 400
    assert series[("boson_queue_paused", (("queue", "rowless"),))] == 0
    assert series[("boson_jobs", (("queue", "rowless"), ("state", "failed")))] == 0


def test_a_scrape_inside_a_transaction_leaves_it_open(client, db):
    """A scrape in a transaction (a test's, ``ATOMIC_REQUESTS``, a view that wraps this one
    in ``atomic``) closed the connection under it: the next query failed ("Cannot operate
    on a closed database", "the connection is closed")."""
    from django.db import connection

    services.enqueue([envelope(NOOP, queue="in-tx")])
    series, _ = scrape(client)
    assert series[("boson_jobs", (("queue", "in-tx"), ("state", "available")))] == 1
    assert connection.in_atomic_block and not connection.needs_rollback
    services.enqueue([envelope(NOOP, queue="in-tx")])
    series, _ = scrape(client)
    assert series[("boson_jobs", (("queue", "in-tx"), ("state", "available")))] == 2


def test_a_failed_scrape_inside_a_transaction_reports_the_store_down_and_leaves_it_usable(client, db):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE boson_bucket RENAME TO boson_bucket_away")  # undone with the test's transaction
    series, _ = scrape(client)
    assert series == {("boson_store_up", ()): 0}
    services.enqueue([envelope(NOOP, queue="after-failure")])
    assert services.job_state(services.all_enqueued()[0].id)[0].queue == "after-failure"
