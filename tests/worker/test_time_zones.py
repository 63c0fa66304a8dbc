"""Time zones shift no stored time: Django's ``TIME_ZONE``, a PostgreSQL session in another
zone (``DATABASES[...]["TIME_ZONE"]``), a due time given in a zone of its own. Real
workers run the jobs while the store clock is frozen days away from real time, and each
stored time is read back raw and compared with the instant it must be."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import override_settings

from boson_django import clock, services
from boson_django.services import Envelope
from tests.factories import NOOP
from tests.testapp.tasks import add, fail, noop, send_mail
from tests.worker.conftest import burst, job, state

MINUTE_MS = 60_000
NEW_YORK = ZoneInfo("America/New_York")
#: +13:45 (+12:45 in its winter): an offset of no whole hour, far from UTC.
CHATHAM = "Pacific/Chatham"


@contextmanager
def database_time_zone(name: str) -> Iterator[None]:
    """``DATABASES["default"]["TIME_ZONE"]`` for the block: on PostgreSQL the session's
    ``TimeZone``, on SQLite the zone Django writes times in. The settings dict is shared
    by every thread's connection; this thread's reconnects with it."""
    settings_dict = connection.settings_dict
    before = settings_dict.get("TIME_ZONE")
    _reconnect(settings_dict, name)
    try:
        yield
    finally:
        _reconnect(settings_dict, before)


def _reconnect(settings_dict: dict[str, Any], name: str | None) -> None:
    wrapper = connections[DEFAULT_DB_ALIAS]  # ``connection`` is a proxy: its caches are the wrapper's
    wrapper.close()
    settings_dict["TIME_ZONE"] = name
    for cached in ("timezone", "timezone_name"):
        wrapper.__dict__.pop(cached, None)


def stored(job_id: str, column: str) -> datetime:
    """A job's time as the database holds it (SQLite keeps naive UTC text)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM boson_job WHERE id = %s", [job_id])
        value = cursor.fetchone()[0]
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def run_through(frozen: Any) -> None:
    """Due times, backoff, retention and a rate limit, through real workers, with times
    given in New York: each is stored and decided as the instant it is."""
    at = frozen.now()
    later = add.using(run_after=(at + timedelta(hours=1)).astimezone(NEW_YORK)).enqueue(1, 2)
    tomorrow = (at + timedelta(days=1)).astimezone(NEW_YORK)
    batch = services.enqueue([Envelope(task=NOOP, run_at=tomorrow) for _ in range(100)])  # a COPY on PostgreSQL
    failing = fail.enqueue("boom")
    kept = noop.using(retention_ms=MINUTE_MS).enqueue()
    services.set_rate_limit("smtp", 2, MINUTE_MS)  # send_mail weighs 2: one a minute
    mails = [send_mail.enqueue("a").id, send_mail.enqueue("b").id]
    burst()
    assert clock.now() == at
    assert (state(later.id), stored(later.id, "run_at"), stored(later.id, "enqueued_at")) == (
        "scheduled", at + timedelta(hours=1), at)
    assert {stored(r.id, "run_at") for r in batch} == {at + timedelta(days=1)}
    assert at < stored(failing.id, "run_at") <= at + timedelta(seconds=1)
    assert (stored(kept.id, "finalized_at"), stored(kept.id, "expires_at")) == (at, at + timedelta(minutes=1))
    assert sorted(state(m) for m in mails) == ["available", "completed"]
    frozen.advance(MINUTE_MS)
    burst()
    assert [state(m) for m in mails] == ["completed", "completed"]
    assert services.job_state(kept.id) is None
    assert job(failing.id).attempt == 2
    frozen.advance(3_600_000 - MINUTE_MS)
    burst()
    done = add.get_result(later.id)
    assert done.return_value == 3 and done.started_at == done.finished_at == at + timedelta(hours=1)


@override_settings(TIME_ZONE="America/New_York")
def test_django_time_zone_shifts_no_stored_time(far_clock):
    run_through(far_clock)


@pytest.mark.postgres
def test_a_postgresql_session_in_another_time_zone_shifts_no_stored_time(far_clock):
    with database_time_zone(CHATHAM):
        with connection.cursor() as cursor:
            cursor.execute("SHOW TimeZone")
            assert cursor.fetchone()[0] == CHATHAM
        assert clock.now().utcoffset() == timedelta(0)  # the same instant, and in UTC as documented
        run_through(far_clock)


@override_settings(TIME_ZONE="America/New_York")
def test_a_cron_slot_is_in_the_schedules_own_zone_not_djangos(far_clock, settings):
    """``0 3 * * *`` with no ``timezone`` is 03:00 UTC, whatever ``TIME_ZONE`` says, and
    it comes due on the store clock."""
    pytest.importorskip("cronsim")
    from boson_django.models import StoredSchedule
    from boson_django.schedules import scheduler

    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"nightly": {"task": add.module_path, "cron": "0 3 * * *", "args": [1, 1]}}}
    scheduler.forget_sync()
    try:
        burst()
        slot = StoredSchedule.objects.get(name="nightly").next_run_at
        assert (slot.astimezone(timezone.utc).hour, slot.minute) == (3, 0)
        assert far_clock.now() < slot <= far_clock.now() + timedelta(days=1)
        far_clock.advance(int((slot - far_clock.now()) / timedelta(milliseconds=1)))
        burst()
    finally:
        scheduler.forget_sync()
    (fired,) = services.list_jobs(task=add.module_path)
    assert add.get_result(fired.id).finished_at == slot
