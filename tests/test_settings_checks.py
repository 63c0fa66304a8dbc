"""SPEC section 5: bad BOSON values fail the system checks naming the key; every store setting acts."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings
from django.utils.connection import ConnectionDoesNotExist

from boson_django import conf, registry, services
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job
from boson_django import database
from boson_django.services import Envelope, Outcome
from tests.factories import NOOP, enqueue_one, running_job, state_of

BASE = {"TASK_MODULES": ["tests.testapp.more_tasks"]}


def boson(**values):
    return override_settings(BOSON={**BASE, **values})


def boson_messages(**values) -> list[checks.CheckMessage]:
    with override_settings(BOSON=values):
        return [m for m in checks.run_checks(tags=["boson"]) if (m.id or "").startswith("boson.")]


@pytest.mark.django_db  # Django's JSONField check asks SQLite whether it has JSON: a query
def test_the_test_settings_pass_the_checks():
    assert boson_messages(**BASE) == []
    call_command("check")


def test_a_schedule_named_twice_in_code_and_settings_is_reported():
    """Each is valid alone; together the scheduler refused to sync any schedule."""
    pytest.importorskip("cronsim")
    taken = "tests.testapp.cron_tasks.nightly"
    (message,) = boson_messages(
        TASK_MODULES=[*BASE["TASK_MODULES"], "tests.testapp.cron_tasks"],
        SCHEDULES={taken: {"task": NOOP, "every": timedelta(hours=1)}},
    )
    assert message.id == "boson.E007" and f"schedule {taken!r} is declared twice" in message.msg


def test_use_tz_false_is_reported():
    """Every time the queue keeps is aware UTC; without USE_TZ the first enqueue failed
    with Django's error about aware datetimes, naming neither setting."""
    with override_settings(USE_TZ=False):
        (message,) = boson_messages(**BASE)
    assert message.id == "boson.E006" and "USE_TZ = True" in message.msg


BAD_VALUES = [
    ("CRASH_LIMIT", "3", "must be int"),
    ("CRASH_LIMIT", 0, ">= 1"),
    ("CRASH_LIMIT", True, "must be int"),
    ("CRASH_LIMIT", 2.0, "must be int"),
    ("MAX_ATTEMPTS", 0, ">= 1"),
    ("MAX_ATTEMPTS", None, "must be int"),
    ("LEASE_MS", 0, ">= 1"),
    ("LEASE_MS", -5, ">= 1"),
    ("RETENTION_MS", -1, ">= 0"),
    ("RETENTION_MS", 10**17, "<= 3153600000000"),
    ("LEASE_MS", 10**15, "<= 3153600000000"),
    ("RETRY_BASE_MS", -1, ">= 0"),
    ("RETRY_CAP_MS", "1h", "must be int"),
    ("POLL_INTERVAL_MS", 0, ">= 1"),
    ("MAX_PAYLOAD_BYTES", 0, ">= 1"),
    ("MAX_PAYLOAD_BYTES", 1.5, "must be int"),
    ("MAX_RESULT_BYTES", 0, ">= 1"),
    ("MAX_RESULT_BYTES", "16MB", "must be int"),
    ("TASK_MODULES", "tests.testapp.more_tasks", "must be list or tuple"),
    ("ALLOWED_TASK_MODULES", "wagtail", "must be list or tuple or None, got str 'wagtail'"),
    ("ALLOWED_TASK_MODULES", ["shop tasks"], "module or package names such as 'shop.tasks' or 'wagtail', got 'shop tasks'"),
    ("ALLOWED_TASK_MODULES", ["shop.", "x"], "got 'shop.'"),
    ("DATABASE", 1, "must be str"),
    ("DATABASE", "nope", "names no database"),
    ("SQLITE_BUSY_RETRIES", -1, ">= 0"),
    ("POOLER", "pgbouncer", "must be None, 'session' or 'transaction', got 'pgbouncer'"),
    ("POOLER", True, "must be str or None"),
    # past these an enqueue (32-bit counts), the worker's start (gc.set_threshold takes a C
    # int) or every sweep (a duty lease of three intervals) failed, naming no setting
    ("MAX_ATTEMPTS", 2**31, "<= 2147483647 (the store's 32-bit counts)"),
    ("CRASH_LIMIT", 2**31, "<= 2147483647"),
    ("GC_THRESHOLD", 2**31, "<= 2147483647"),
    ("SWEEP_INTERVAL_MS", 100 * 365 * 86_400_000 // 3 + 1, "<= 1051200000000 (a sweep's duty lease"),
]


@pytest.mark.parametrize("key, value, says", BAD_VALUES, ids=[f"{k}={v!r}" for k, v, _ in BAD_VALUES])
def test_a_bad_value_is_an_error_naming_the_key(key, value, says):
    messages = boson_messages(**{key: value})
    assert len(messages) == 1, messages
    (message,) = messages
    assert message.level == checks.ERROR
    assert f"BOSON[{key!r}]" in message.msg
    assert says in message.msg, message.msg


@pytest.mark.django_db  # Django 6.1's model checks read the database
def test_check_command_fails_at_start_up_on_a_bad_value():
    with override_settings(BOSON={"LEASE_MS": 0}), pytest.raises(SystemCheckError, match="LEASE_MS"):
        call_command("check")


@pytest.mark.parametrize("typo, meant", [("CRASH_LIMT", "CRASH_LIMIT"), ("lease_ms", "LEASE_MS"),
                                         ("RETRY_CAP", "RETRY_CAP_MS"), ("MAX_ATTEMPT", "MAX_ATTEMPTS")])
def test_an_unknown_key_suggests_the_right_one(typo, meant):
    (message,) = boson_messages(**{typo: 3})
    assert message.id == "boson.E001"
    assert repr(typo) in message.msg
    assert message.hint == f"Did you mean {meant!r}?"


def test_an_unknown_key_with_no_near_match_lists_the_known_keys():
    (message,) = boson_messages(ZZZZZZ=1)
    assert "CRASH_LIMIT" in message.hint and "LEASE_MS" in message.hint


def test_retry_base_above_cap_is_reported():
    (message,) = boson_messages(RETRY_BASE_MS=5_000, RETRY_CAP_MS=1_000)
    assert message.id == "boson.E003"
    assert "RETRY_BASE_MS" in message.msg and "RETRY_CAP_MS" in message.msg
    (message,) = boson_messages(RETRY_BASE_MS=3_600_001)  # above the default cap
    assert message.id == "boson.E003"


def test_several_bad_values_are_all_reported():
    messages = boson_messages(CRASH_LIMIT=0, LEASE_MS="x", CRASH_LIMT=1)
    text = " ".join(m.msg for m in messages)
    assert len(messages) == 3 and "CRASH_LIMIT" in text and "LEASE_MS" in text and "CRASH_LIMT" in text


def test_a_boson_setting_that_is_not_a_dict_is_reported():
    for bad in (["LEASE_MS"], "LEASE_MS=1", 3):
        (message,) = boson_messages_raw(bad)
        assert "BOSON" in message.msg and "dict" in message.msg


def boson_messages_raw(value) -> list[checks.CheckMessage]:
    with override_settings(BOSON=value):
        return [m for m in checks.run_checks(tags=["boson"]) if (m.id or "").startswith("boson.")]


@pytest.mark.parametrize("modules, says", [
    (["tests.testapp.no_such_module"], "tests.testapp.no_such_module"),
    (["no_such_package.tasks"], "no_such_package.tasks"),
    ([42], "42"),
])
def test_task_modules_that_cannot_be_imported_are_reported(modules, says):
    (message,) = boson_messages(TASK_MODULES=modules)
    assert "TASK_MODULES" in message.msg and says in message.msg


def test_every_documented_key_has_a_default_a_rule_and_a_doc():
    assert set(conf.DEFAULTS) == set(conf.DOCS) == set(conf.RULES)
    for key, default in conf.DEFAULTS.items():
        assert boson_messages(**{**BASE, key: default}) == [], key


def test_each_key_is_declared_once_and_the_views_come_from_it():
    import importlib
    from dataclasses import fields

    declared = {each.name: each.metadata["setting"] for each in fields(conf.Settings)}
    assert declared == conf.SETTINGS
    assert conf.RULES["POOLER"] == ((str, type(None)), None)
    assert conf.RULES["TASK_MODULES"] == ((list, tuple), None)
    assert conf.RULES["CRASH_LIMIT"] == (int, 1)
    assert conf.Settings() == conf.Settings(**conf.DEFAULTS)
    assert conf.Settings().SCHEDULES is not conf.Settings().SCHEDULES  # a fresh dict each
    for key, setting in conf.SETTINGS.items():
        if setting.check:
            module, name = setting.check.split(":")
            assert callable(getattr(importlib.import_module(module), name)), key


def test_a_declared_check_runs_on_a_value_of_the_right_type():
    (message,) = boson_messages(NOTIFY_CHANNEL="not a name")
    assert message.id == "boson.E002" and "NOTIFY_CHANNEL" in message.msg and "plain identifier" in message.msg


# -- each store setting has an effect -------------------------------------------------


@boson(MAX_ATTEMPTS=2)
def test_max_attempts_sets_the_retry_budget(store_clock):
    unit = running_job()
    assert Job.objects.get(id=unit.lease.job_id).max_attempts == 2
    assert services.ack(unit.lease, Outcome.RETRY, delay_ms=1) == "retryable"
    store_clock.advance(1)
    services.promote_due()
    (unit,) = services.admit("w", [], 1)
    assert services.ack(unit.lease, Outcome.RETRY, delay_ms=1) == "failed"


@boson(LEASE_MS=5_000)
def test_lease_ms_is_the_default_lease(store_clock):
    unit = running_job()
    assert unit.lease_expires_at == store_clock.now() + timedelta(milliseconds=5_000)
    store_clock.advance(4_999)
    assert services.reclaim_expired() == []
    store_clock.advance(1)
    assert [r.job_id for r in services.reclaim_expired()] == [unit.lease.job_id]


@boson(RETENTION_MS=10_000)
def test_retention_ms_keeps_finished_jobs_that_long(store_clock):
    unit = running_job()
    services.ack(unit.lease, Outcome.SUCCESS)
    store_clock.advance(9_999)
    assert services.evict_retained() == 0
    store_clock.advance(1)
    assert services.evict_retained() == 1
    assert state_of(unit.lease.job_id) is None


@boson(RETENTION_MS=0)
def test_retention_ms_zero_deletes_at_ack(store_clock):
    unit = running_job()
    assert services.ack(unit.lease, Outcome.SUCCESS) is None
    assert state_of(unit.lease.job_id) is None


@boson(CRASH_LIMIT=1)
def test_crash_limit_quarantines_after_that_many_lease_expiries(store_clock):
    running_job(lease_ms=1_000)
    store_clock.advance(1_000)
    (reclaimed,) = services.reclaim_expired()
    assert (reclaimed.state, reclaimed.crash_attempt) == ("quarantined", 1)


@boson(RETRY_BASE_MS=100, RETRY_CAP_MS=300)
def test_retry_base_and_cap_bound_the_backoff(store_clock):
    job_id = enqueue_one(NOOP, queue="backoff", max_attempts=10)
    waits = []
    for _ in range(5):
        services.promote_due()
        (unit,) = services.admit("w", ["backoff"], 1)
        services.ack(unit.lease, Outcome.RETRY)
        run_at = Job.objects.get(id=job_id).run_at
        waits.append((run_at - store_clock.now()) / timedelta(milliseconds=1))
        store_clock.advance(int(waits[-1]))
    bounds = [100, 200, 300, 300, 300]  # min(cap, base * 2**(attempt-1))
    for wait, bound in zip(waits, bounds):
        assert bound // 2 <= wait <= bound, (waits, bounds)


@boson(MAX_PAYLOAD_BYTES=64)
def test_max_payload_bytes_limits_enqueue(store_clock):
    services.enqueue([Envelope(task=NOOP, args=["x" * 40])])
    with pytest.raises(InvalidEnvelope, match="MAX_PAYLOAD_BYTES=64"):
        services.enqueue([Envelope(task=NOOP, args=["x" * 80])])


def test_task_modules_decides_what_is_discovered(db):
    """A fresh process imports TASK_MODULES at discovery; without it, the task is not among
    the known names until a job names it (then its module is imported on demand)."""
    from tests.concurrency.support import ROOT, subprocess_env

    script = (
        "import sys, tests.settings as s\n"
        "s.BOSON = {'TASK_MODULES': sys.argv[1:]}\n"
        "import django; django.setup()\n"
        "from boson_django import registry\n"
        "name = 'tests.testapp.more_tasks.extra'\n"
        "print(name in registry.names(), registry.is_registered(name))\n"
    )
    def registered(*modules: str) -> str:
        out = subprocess.run([sys.executable, "-c", script, *modules], env=subprocess_env(), cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert registered("tests.testapp.more_tasks") == "True True"
    assert registered() == "False True"
    assert registry.is_registered("tests.testapp.more_tasks.extra")


def test_database_names_the_alias_the_services_use(store_clock):
    assert database.alias(None) == "default"
    with boson(DATABASE="elsewhere"):
        assert database.alias(None) == "elsewhere"
        with pytest.raises(ConnectionDoesNotExist):
            services.enqueue([Envelope(task=NOOP)])
        with pytest.raises(ConnectionDoesNotExist):
            services.counts()
    assert database.alias("default") == "default"
    assert connection.alias == "default"


@pytest.mark.django_db  # Django 6.1's model checks read the database
def test_a_module_of_tasks_that_fails_to_import_stops_the_start_up(monkeypatch):
    """A cron schedule declared where cronsim is not installed: the module's import fails,
    and with it every task and schedule it declares. Reported at start-up (the worker's
    command runs the checks), not only in a running worker's log."""
    monkeypatch.setitem(sys.modules, "cronsim", None)  # as if the extra were not installed
    messages = boson_messages(TASK_MODULES=["tests.testapp.more_tasks", "tests.testapp.cron_tasks"])
    assert [m.id for m in messages] == ["boson.E005"]
    assert "'tests.testapp.cron_tasks'" in messages[0].msg and "cronsim" in messages[0].msg
    with boson(TASK_MODULES=["tests.testapp.cron_tasks"]), pytest.raises(SystemCheckError, match="boson.E005"):
        call_command("check")
    assert "tests.testapp.cron_tasks" not in sys.modules


@pytest.mark.django_db
def test_a_module_of_tasks_that_queries_at_import_is_told_to_move_the_query():
    """The migration guide's set_rate_limit beside the tasks, run on a fresh database:
    `migrate` stopped on boson.E005 ("no such table"), with a hint that said nothing of
    why or what to do."""
    messages = boson_messages(TASK_MODULES=["tests.testapp.import_query_tasks"])
    assert [m.id for m in messages] == ["boson.E005"]
    assert "boson_table_not_migrated_yet" in messages[0].msg
    assert "queried the database while being imported" in messages[0].hint
    assert "data migration" in messages[0].hint
    assert "tests.testapp.import_query_tasks" not in sys.modules


class _ElsewhereRouter:
    """A project's router that sends every model to another database."""

    def db_for_read(self, model, **hints):
        return "elsewhere"

    db_for_write = db_for_read


def test_a_store_database_the_routers_do_not_send_boson_models_to_is_reported():
    """The services use BOSON['DATABASE']; the admin and migrate go where the routers
    send boson_django's models. Apart, the admin showed another database's jobs."""
    with override_settings(DATABASE_ROUTERS=[f"{__name__}._ElsewhereRouter"]):
        (message,) = boson_messages(**BASE, DATABASE="default")
    assert message.id == "boson.W001"
    assert "'default'" in message.msg and "'elsewhere'" in message.msg
    assert "boson_django.routers.StoreRouter" in message.hint
    with override_settings(DATABASE_ROUTERS=["boson_django.routers.StoreRouter", f"{__name__}._ElsewhereRouter"]):
        assert boson_messages(**BASE, DATABASE="default") == []
    assert boson_messages(**BASE, DATABASE="default") == []  # no routers: every model on default


def test_the_store_router_sends_boson_models_and_their_migrations_to_the_store_database():
    from django.contrib.auth.models import User

    from boson_django.routers import StoreRouter

    router = StoreRouter()
    with boson(DATABASE="elsewhere"):
        assert router.db_for_read(Job) == router.db_for_write(Job) == "elsewhere"
        assert router.db_for_read(User) is None
        assert router.allow_migrate("elsewhere", "boson_django") is True
        assert router.allow_migrate("default", "boson_django", model_name="job") is False
        assert router.allow_migrate("default", "auth") is None
    assert router.db_for_read(Job) == "default"


def test_a_sqlite_store_without_immediate_transactions_is_reported(monkeypatch):
    """An enqueue joins the caller's transaction; one Django began DEFERRED must upgrade
    its lock to write, which SQLite refuses at once while a worker writes: a view that
    enqueued inside transaction.atomic() failed with 'database is locked'."""
    from django.db import connections

    found = connections.settings["default"]
    if not found["ENGINE"].endswith("sqlite3"):
        assert [m for m in boson_messages(**BASE) if m.id == "boson.W002"] == []
        return
    assert found["OPTIONS"]["transaction_mode"] == "IMMEDIATE"  # the suite's own settings
    monkeypatch.setitem(found, "OPTIONS", {"timeout": 20})
    (message,) = boson_messages(**BASE)
    assert message.id == "boson.W002" and "'default'" in message.msg
    assert '"transaction_mode": "IMMEDIATE"' in message.hint


@pytest.mark.parametrize("mode, warned", [
    ("immediate", False), ("Immediate", False), ("EXCLUSIVE", False), ("exclusive", False),
    ("DEFERRED", True), (None, True),
])
def test_only_a_sqlite_store_beginning_without_the_write_lock_is_reported(monkeypatch, mode, warned):
    """Django upper-cases ``transaction_mode``, and in WAL mode EXCLUSIVE begins as
    IMMEDIATE does: ``"immediate"`` works as well as ``"IMMEDIATE"``, but was warned about."""
    from django.db import connections

    found = connections.settings["default"]
    if not found["ENGINE"].endswith("sqlite3"):
        pytest.skip("a SQLite store's check")
    monkeypatch.setitem(found, "OPTIONS", {"timeout": 20, "transaction_mode": mode})
    assert [m.id for m in boson_messages(**BASE)] == (["boson.W002"] if warned else [])


def test_a_sqlite_store_keeping_its_times_in_a_zone_of_its_own_is_reported(monkeypatch):
    """On SQLite Django writes times in the database's TIME_ZONE and boson read them back
    as UTC: a store clock frozen at 12:00 UTC read 07:00 in New York, due times and
    leases with it. PostgreSQL keeps each time with its zone: any session zone is fine."""
    from django.db import connections

    found = connections.settings["default"]
    monkeypatch.setitem(found, "TIME_ZONE", "America/New_York")
    reported = [m for m in boson_messages(**BASE) if m.id == "boson.E010"]
    if not found["ENGINE"].endswith("sqlite3"):
        assert reported == []
        return
    (message,) = reported
    assert "'default'" in message.msg and "'America/New_York'" in message.msg
    assert 'Remove "TIME_ZONE" from DATABASES[\'default\']' in message.hint
    monkeypatch.setitem(found, "TIME_ZONE", "UTC")
    assert [m for m in boson_messages(**BASE) if m.id == "boson.E010"] == []


@pytest.mark.parametrize("zone", ["Etc/UTC", "Etc/Universal", "Zulu", "GMT", "Etc/GMT", "Etc/GMT+0"])
def test_a_sqlite_store_in_another_name_of_utc_is_not_reported(monkeypatch, zone):
    """``Etc/UTC`` (many container images' zone), ``GMT`` and the like are UTC: Django
    writes the same times in them, and an error would stop ``migrate`` and the worker."""
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "TIME_ZONE", zone)
    assert [m for m in boson_messages(**BASE) if m.id == "boson.E010"] == []
