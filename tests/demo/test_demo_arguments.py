"""``manage.py boson_demo`` refuses a bad option by name, before it resets the demo's
database or starts anything."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("option, value, says", [
    ("--port", "70000", "must be a port number from 1 to 65535, got '70000'"),
    ("--port", "0", "must be a whole number >= 1, got '0'"),
    ("--timeout", "nan", "must be a number of seconds >= 0, got 'nan'"),
    ("--timeout", "-1", "must be a number of seconds >= 0, got '-1'"),
])
def test_a_bad_option_is_refused_by_name_before_anything_starts(tmp_path, option, value, says):
    """A port past 65535 ended in an OverflowError traceback once the database had been
    reset and the workers started; port 0 ran a server no browser could reach, at the
    address it printed; a negative or NaN timeout gave up before the first job ran."""
    database = tmp_path / "demo.sqlite3"
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="demo_site.settings", PYTHONPATH=str(ROOT),
               BOSON_DEMO_DB="sqlite", BOSON_DEMO_SQLITE=str(database))
    done = subprocess.run([sys.executable, "manage.py", "boson_demo", option, value, "--log-dir", str(tmp_path / "logs")],
                          cwd=ROOT / "example_project", env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: {says}" in done.stderr
    assert not database.exists() and not (tmp_path / "logs").exists()
