"""The demo's non-interactive mode, end to end: ``manage.py boson_demo --drain`` in the
example project, with real worker processes, on the store this suite runs against.

The command itself asserts where every job ended (completed; retried then completed;
rate-limited then completed; resumed after a kill; deduplicated; quarantined) and exits
non-zero otherwise. On PostgreSQL it uses its own database, dropped afterwards.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_project"


def _demo_env(tmp_path: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="demo_site.settings", PYTHONPATH=str(ROOT))
    if os.environ.get("BOSON_TEST_DB", "sqlite") == "postgres":
        env.update(BOSON_DEMO_DB="postgres", BOSON_DEMO_PG_NAME=_pg_name())
    else:
        env.update(BOSON_DEMO_DB="sqlite", BOSON_DEMO_SQLITE=str(tmp_path / "demo.sqlite3"))
    return env


def _pg_name() -> str:
    return os.environ.get("BOSON_PG_TEST_NAME", "test_boson") + "_demo"


@pytest.fixture
def demo_db():
    yield
    if os.environ.get("BOSON_TEST_DB", "sqlite") == "postgres":
        import psycopg

        with psycopg.connect(dbname="postgres", user=os.environ.get("BOSON_PG_USER", "postgres"),
                             host=os.environ.get("BOSON_PG_HOST", "127.0.0.1"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{_pg_name()}" WITH (FORCE)')


@pytest.mark.slow
def test_demo_drains_every_job_to_its_expected_end(tmp_path, demo_db):
    command = [sys.executable, "manage.py", "boson_demo", "--drain", "--timeout", "120",
               "--log-dir", str(tmp_path / "logs")]
    done = subprocess.run(command, cwd=EXAMPLE, env=_demo_env(tmp_path), capture_output=True, text=True, timeout=240)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((tmp_path / "logs").glob("*.log")))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
    assert "every demo job ended where it should" in done.stdout
    for group in ("emails", "partner flaky", "partner 429", "report", "search index", "poison feed"):
        assert f"ok   {group}" in done.stdout, done.stdout


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not pathlib.Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_killed_demo_stops_its_workers_and_server(tmp_path, demo_db):
    """``kill`` (SIGTERM) of the interactive demo ends its workers and its server too, as
    Ctrl-C does: they run in sessions of their own, so nothing else would."""
    import signal
    import time

    command = [sys.executable, "manage.py", "boson_demo", "--port", "8765", "--log-dir", str(tmp_path / "logs")]
    demo = subprocess.Popen(command, cwd=EXAMPLE, env=_demo_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in demo.stdout:  # the header comes once the server is started
            lines.append(line)
            if "Ctrl-C stops" in line:
                break
        children = _children_of(demo.pid)
        assert len(children) >= 5, "".join(lines)  # the demo's workers and its server

        demo.send_signal(signal.SIGTERM)
        out, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in children if _alive(pid)]
    for pid in left:  # a failed run leaves no orphans behind
        os.kill(pid, signal.SIGKILL)
    assert not left, out
    assert "stopping workers and the server" in out
