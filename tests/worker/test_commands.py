"""``boson_status`` and ``boson_sweep`` as an operator runs them."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from boson_django import services
from tests.testapp.tasks import add, noop
from tests.worker.conftest import state


def run(name: str, *args: str) -> str:
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def test_status_shows_queues_by_state_leases_duties_and_the_oldest_waiting_job(live_clock):
    waiting = add.enqueue(1, 2)
    mail = noop.using(queue_name="mail").enqueue()
    services.pause_queue("mail")
    unit = services.admit("w-status", ["default"], 1)[0]
    later = noop.enqueue()
    services.claim_duty("boson.promote", "w-status", 60_000)
    live_clock.advance(90_000)
    text = run("boson_status")
    assert "mail (paused)" in text
    default_row = next(line for line in text.splitlines() if line.startswith("default "))
    assert default_row.split()[1:4] == ["0", "1", "1"]  # scheduled, available, running
    assert "running leases: 1" in text and unit.lease.job_id in text and "expired" in text
    assert "boson.promote: free" in text
    assert "quarantined: 0" in text
    assert f"oldest waiting job: {mail.id} tests.testapp.tasks.noop on mail, due 1m 30s ago" in text
    assert waiting.id == unit.lease.job_id and state(later.id) == "available"


def test_status_on_an_empty_store(live_clock):
    text = run("boson_status")
    assert "(no queues yet)" in text and "(none claimed yet)" in text and "none due" in text


def test_sweep_promotes_reclaims_and_evicts_once(live_clock):
    from datetime import timedelta

    due = noop.using(run_after=live_clock.now() + timedelta(seconds=1)).enqueue()
    noop.enqueue()
    crashed = services.admit("w-dead", [], 1)[0]  # its worker never renews
    done = noop.using(retention_ms=1_000).enqueue()
    unit = services.admit("w-live", [], 1)[0]
    assert unit.lease.job_id == done.id
    services.ack(unit.lease, "success")
    live_clock.advance(60_000)
    text = run("boson_sweep")
    assert "promote: 1" in text and "reclaim: 1" in text and "evict: 1" in text
    assert state(due.id) == "available"
    assert state(crashed.lease.job_id) == "available"
    assert state(done.id) is None


def test_sweep_help_names_every_sweep_it_runs():
    """Its help named promote, reclaim and evict only; it also prunes and ticks schedules."""
    from boson_django.management.commands.boson_sweep import Command
    from boson_django.worker.sweeper import DUTIES

    for name, _ in DUTIES:
        assert name.removeprefix("boson.") in Command.help


def test_sweep_skips_a_duty_another_node_holds(live_clock):
    services.claim_duty("boson.reclaim", "someone-else", 60_000)
    text = run("boson_sweep")
    assert "reclaim: skipped (held by another node)" in text and "promote: 0" in text


def test_worker_rejects_a_bad_concurrency():
    with pytest.raises(CommandError):
        call_command("boson_worker", "--concurrency", "0")


@pytest.mark.parametrize("option, value, says", [
    ("--concurrency", "0", "must be a whole number >= 1, got '0'"),
    ("--max-jobs", "many", "must be a whole number >= 1, got 'many'"),
    ("--poll-interval-ms", "-5", "must be a whole number >= 1"),
    ("--grace-seconds", "-1", "must be a number of seconds >= 0, got '-1'"),
    ("--grace-seconds", "nan", "must be a number of seconds >= 0"),
    ("--queue", " ", "a queue name cannot be empty"),
    ("--queue", "q" * 101, "must be at most 100 characters"),
    ("--queue", "a\nb", "contains a control character ('\\n')"),
    ("--worker-id", "w" * 256, "must be at most 255 characters"),
    ("--worker-id", " ", "must be a non-empty string"),
    ("--worker-id", "w\x1b[31m", "contains a control character ('\\x1b')"),
])
def test_worker_options_out_of_range_are_refused_by_name(live_clock, option, value, says):
    waiting = noop.enqueue()
    with pytest.raises(CommandError) as refused:
        call_command("boson_worker", "--burst", option, value)
    assert option in str(refused.value) and says in str(refused.value)
    assert state(waiting.id) == "available"  # no worker ran


@pytest.mark.parametrize("command, option, value, says", [
    ("boson_sweep", "--batch", "-3", "must be a whole number >= 1, got '-3'"),
    ("boson_sweep", "--batch", "0", "must be a whole number >= 1, got '0'"),
    ("boson_status", "--leases", "-5", "must be a whole number >= 0, got '-5'"),
    ("boson_status", "--leases", str(10**20), "must be a whole number <= 2147483647"),
    ("boson_sweep", "--batch", str(2**31), "must be a whole number <= 2147483647"),
])
def test_status_and_sweep_options_out_of_range_are_refused_by_name(live_clock, command, option, value, says):
    """Not a traceback from the store (a negative slice, a sweep's ``limit``), nor a sweep
    of nothing reported as done."""
    due = noop.using(run_after=live_clock.now() + timedelta(seconds=1)).enqueue()
    live_clock.advance(2_000)  # due: a sweep would promote it
    with pytest.raises(CommandError) as refused:
        call_command(command, option, value)
    assert option in str(refused.value) and says in str(refused.value)
    assert state(due.id) == "scheduled"


@pytest.mark.parametrize("command", ["boson_worker", "boson_status", "boson_sweep", "boson_check"])
def test_an_unknown_database_alias_is_refused_by_name(live_clock, command):
    with pytest.raises(CommandError, match="no database 'elsewhere' in DATABASES"):
        call_command(command, "--database", "elsewhere")


@pytest.mark.parametrize("command", ["boson_worker", "boson_status", "boson_sweep", "boson_check"])
def test_a_command_on_a_database_without_the_migrations_says_to_migrate(tmp_path, command):
    """Not a worker's tick failing and retrying forever, nor a traceback: one clear error,
    exit status 1."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(root), BOSON_TEST_DB="sqlite",
               BOSON_SQLITE_PATH=str(tmp_path / "never-migrated.sqlite3"))
    done = subprocess.run([sys.executable, "-m", "django", command, *(["--burst"] if command == "boson_worker" else [])],
                          cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "database 'default' lacks boson_django's migrations 0001_initial" in done.stderr
    assert "run `manage.py migrate --database default` first" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", [":memory:", "file:memorydb_default?mode=memory&cache=shared"])
def test_a_command_on_an_in_memory_sqlite_database_says_to_use_a_file(tmp_path, name):
    """A worker a test starts on its runner's in-memory database (SQLite without a
    ``TEST`` name) opens an empty one of its own: the error says so, not "migrate"."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(root), BOSON_TEST_DB="sqlite",
               BOSON_SQLITE_PATH=name)
    done = subprocess.run([sys.executable, "-m", "django", "boson_worker", "--burst"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "database 'default' is an in-memory SQLite database" in done.stderr
    assert "['TEST']['NAME']" in done.stderr
    assert "Traceback" not in done.stderr
    assert os.listdir(tmp_path) == []  # no file named after the URI was left behind


@pytest.mark.parametrize("command", ["boson_status", "boson_sweep", "boson_check"])
def test_output_into_a_closed_pipe_ends_quietly_with_status_141(tmp_path, command):
    """``boson_status | head``: a reader that stops reading ended the command with a
    BrokenPipeError traceback and status 1. Now: not a word, and 128 + SIGPIPE."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(root), BOSON_TEST_DB="sqlite",
               BOSON_SQLITE_PATH=str(tmp_path / "store.sqlite3"))
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=root, env=env, check=True, timeout=120)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        done = subprocess.run([sys.executable, "-m", "django", command], cwd=root, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""
