"""Every job row carries its lease length and crash limit, so every claim sets a lease
expiry that a reclaim finds, and a reclaim counts crashes against the job's own limit.

Enqueue always writes both; these pin the rows written some other way (by hand, or
before migration 0007 made the columns refuse NULL).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from contextlib import contextmanager

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from boson_django import conf, services
from boson_django.models import Job
from tests.factories import ADD, NOOP
from tests.worker.conftest import burst

BEFORE = ("boson_django", "0006_task_config_uniqueness")


def _hand_written(job_id: str, task: str, now, **policy: int | None) -> None:
    """A job row as a script writes it, not through ``services.enqueue``."""
    Job.objects.create(id=job_id, task=task, queue="by-hand", state="available", args=[1, 2] if task == ADD else [],
                       fingerprint=job_id, max_attempts=3, run_at=now, enqueued_at=now, **policy)


@contextmanager
def _migrated_back_to(target: tuple[str, str]) -> Iterator[Any]:
    """The store's schema as of ``target`` until the block ends; then every migration again.
    Yields the models as of ``target`` (today's TaskConfig has columns that schema lacks)."""
    state = MigrationExecutor(connection).migrate([target])
    try:
        yield state.apps
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes("boson_django"))


@pytest.mark.parametrize("column", ["lease_ms", "crash_limit"])
def test_a_job_row_without_a_lease_length_or_crash_limit_is_refused(store_clock, column):
    policy = {"lease_ms": 30_000, "crash_limit": 3, column: None}
    with pytest.raises(IntegrityError), transaction.atomic():
        _hand_written("by-hand", NOOP, store_clock.now(), **policy)
    assert not Job.objects.filter(id="by-hand").exists()


def test_the_migration_gives_rows_without_a_policy_one_and_their_jobs_run(live_clock):
    """Rows left without a lease length or crash limit take their task's TaskConfig value,
    else the BOSON setting: claimed, each gets a lease expiry; a reclaim finds it once it
    passes and hands the job back (one crash is under the limit); a worker completes it."""
    now, settings = live_clock.now(), conf.get()
    with _migrated_back_to(BEFORE) as then:
        then.get_model("boson_django", "TaskConfig").objects.create(task=ADD, lease_ms=5_000, crash_limit=2)
        _hand_written("configured", ADD, now)
        _hand_written("default", NOOP, now)
    assert set(Job.objects.values_list("id", "lease_ms", "crash_limit")) == {
        ("configured", 5_000, 2), ("default", settings.LEASE_MS, settings.CRASH_LIMIT)}

    units = services.admit("w1", ["by-hand"], 2)
    expiry = {u.lease.job_id: (u.lease_expires_at - now).total_seconds() * 1000 for u in units}
    assert expiry == {"configured": 5_000, "default": settings.LEASE_MS}
    live_clock.advance(settings.LEASE_MS)
    assert {(r.job_id, r.state) for r in services.reclaim_expired()} == {("configured", "available"), ("default", "available")}

    burst("--queue", "by-hand")
    assert dict(Job.objects.values_list("id", "state")) == {"configured": "completed", "default": "completed"}


def test_the_migration_keeps_the_value_a_row_has_and_fills_only_the_missing_one(live_clock):
    """A row missing only one of the two keeps the other as it was: its task's TaskConfig
    value or the setting fills only the column that was NULL."""
    now, settings = live_clock.now(), conf.get()
    with _migrated_back_to(BEFORE) as then:
        then.get_model("boson_django", "TaskConfig").objects.create(task=ADD, lease_ms=5_000, crash_limit=None)
        _hand_written("no-limit", ADD, now, lease_ms=9_000)
        _hand_written("no-lease", ADD, now, crash_limit=7)
        _hand_written("no-lease-default", NOOP, now, crash_limit=8)
        _hand_written("both", NOOP, now, lease_ms=1_000, crash_limit=1)
    assert set(Job.objects.values_list("id", "lease_ms", "crash_limit")) == {
        ("no-limit", 9_000, settings.CRASH_LIMIT), ("no-lease", 5_000, 7),
        ("no-lease-default", settings.LEASE_MS, 8), ("both", 1_000, 1)}


def test_the_migration_fills_the_job_rows_in_one_update(live_clock):
    """A store upgrades with a live queue of many jobs: one UPDATE of the rows missing a
    value, not one pass over the table per column. (Each column's AlterField is Django's
    own: on PostgreSQL a scan under the table's lock each, on SQLite a copy of the table
    each -- what docs/migrating.md measures.)"""
    with _migrated_back_to(BEFORE):
        _hand_written("default", NOOP, live_clock.now())
        executor = MigrationExecutor(connection)
        with CaptureQueriesContext(connection) as queries:
            executor.migrate([("boson_django", "0007_job_policy_not_null")])
        statements = [" ".join(q["sql"].split()) for q in queries.captured_queries]
        assert len([s for s in statements if s.startswith('UPDATE "boson_job"')]) == 1
    assert Job.objects.get(id="default").lease_ms == conf.get().LEASE_MS


ROUTED = """
import sys
import django
from django.conf import settings

path = sys.argv[1]
apps = ["django.contrib.contenttypes", "django.contrib.auth", "boson_django"]
try:
    import django.tasks  # noqa: F401
except ImportError:
    apps.insert(0, "django_tasks")
settings.configure(
    SECRET_KEY="x", USE_TZ=True, INSTALLED_APPS=apps, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DATABASES={alias: {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{path}/{alias}.sqlite3"} for alias in ("default", "store")},
    DATABASE_ROUTERS=["boson_django.routers.StoreRouter"], BOSON={"DATABASE": "store", "LEASE_MS": 4000},
    TASKS={"default": {"BACKEND": "boson_django.backend.BosonBackend"}},
)
django.setup()
from django.core.management import call_command
from django.db import connections

for alias in ("default", "store"):
    call_command("migrate", "boson_django", "0006", database=alias, verbosity=0)
with connections["store"].cursor() as c:
    c.execute("INSERT INTO boson_job (id, task, queue, state, priority, args, kwargs, meta, fingerprint, weight, "
              "max_attempts, crash_limit, attempt, crash_attempt, fence, charged_weight, last_error, run_at, enqueued_at) "
              "VALUES ('a', 't', 'q', 'available', 0, '[]', '{}', '{}', 'f', 1, 3, 5, 0, 0, 0, 0, '', '2030-01-01', '2030-01-01')")
for alias in ("default", "store"):
    call_command("migrate", "boson_django", database=alias, verbosity=0)
print([t for t in connections["default"].introspection.table_names() if t.startswith("boson")])
with connections["store"].cursor() as c:
    c.execute("SELECT id, lease_ms, crash_limit FROM boson_job")
    print(c.fetchall())
    c.execute("SELECT sql FROM sqlite_master WHERE name = 'boson_job'")
    table = c.fetchone()[0]
    print([column in table for column in ('"lease_ms" bigint NOT NULL', '"crash_limit" integer unsigned NOT NULL')])
"""


def test_the_migration_fills_and_alters_the_store_database_the_router_names(tmp_path):
    """With BOSON["DATABASE"] on another alias and the StoreRouter, migrating each alias
    fills and alters the store's job table and creates none on ``default``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    run = subprocess.run([sys.executable, "-c", ROUTED, str(tmp_path)], capture_output=True, text=True,
                         cwd=root, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    assert out == ["[]", "[('a', 4000, 5)]", "[True, True]"]
