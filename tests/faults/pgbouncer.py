"""A real PgBouncer (Debian's ``pgbouncer`` package) in front of the test's PostgreSQL,
on a free loopback port, for the pooled scenarios (tests/faults/test_pgbouncer.py).

Trust authentication for the ``postgres`` user, ``listen_addr`` 127.0.0.1, one pool mode
(``transaction`` or ``session``), every database name forwarded to the server the test
settings name. PgBouncer refuses to run as root: as root it is started with ``-u
postgres``, from a folder that user can read. Without the binary the tests are skipped,
except in CI (``CI`` set), which installs it: there a skip would hide a broken setup.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
from decimal import Decimal
from typing import Any

import pytest

from tests.worker.conftest import wait_until

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_pgbouncer() -> None:
    if os.path.exists(BINARY):
        return
    if in_ci():
        pytest.fail("PgBouncer is not installed (apt-get install pgbouncer)", pytrace=False)
    pytest.skip("needs PgBouncer: apt-get install pgbouncer")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgBouncer:
    """One PgBouncer process: ``start()``, ``stop()``, and its admin console's counts."""

    def __init__(self, mode: str, server_host: str, server_port: int | str, user: str = "postgres"):
        self.mode, self.user = mode, user
        self.server = (server_host or "127.0.0.1", int(server_port or 5432))
        self.port = free_port()
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix=f"boson-pgbouncer-{mode}-"))
        self.log = self.folder / "pgbouncer.log"
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> PgBouncer:
        require_pgbouncer()
        ini = self._write_config()
        as_user = ["-u", self.user] if os.geteuid() == 0 else []  # it refuses to run as root
        with open(self.log, "wb") as out:
            self.popen = subprocess.Popen([BINARY, *as_user, str(ini)], stdout=out, stderr=subprocess.STDOUT)
        wait_until(self._answers, 20, what=f"PgBouncer on 127.0.0.1:{self.port} ({self.log})")
        return self

    def _write_config(self) -> pathlib.Path:
        self.folder.chmod(0o755)
        users = self.folder / "userlist.txt"
        users.write_text(f'"{self.user}" ""\n')
        ini = self.folder / "pgbouncer.ini"
        ini.write_text("\n".join([
            "[databases]",
            f"* = host={self.server[0]} port={self.server[1]}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {users}",
            f"admin_users = {self.user}",
            f"pool_mode = {self.mode}",
            "max_client_conn = 200",
            "default_pool_size = 20",
            "",
        ]))
        for path in (users, ini):
            path.chmod(0o644)
        return ini

    def _answers(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            raise AssertionError(f"PgBouncer exited ({self.popen.returncode}):\n{self.log.read_text()}")
        try:
            self.stats("postgres")
        except Exception:  # noqa: BLE001 -- not listening yet
            return False
        return True

    def admin(self, command: str) -> list[dict[str, Any]]:
        """A ``SHOW`` command on PgBouncer's admin console (simple query protocol)."""
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user=self.user,
                             autocommit=True, cursor_factory=psycopg.ClientCursor, connect_timeout=5) as conn:
            with conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(command)
                return cursor.fetchall()

    def stats(self, database: str) -> dict[str, int]:
        """``SHOW STATS`` of ``database``: transactions and queries served so far."""
        for row in self.admin("SHOW STATS"):
            if row["database"] == database:
                return {k: int(v) for k, v in row.items() if isinstance(v, (int, Decimal))}
        return {"total_xact_count": 0, "total_query_count": 0}

    def env(self) -> dict[str, str]:
        """What makes a test subprocess connect through this PgBouncer."""
        return {"BOSON_PG_HOST": "127.0.0.1", "BOSON_PG_PORT": str(self.port), "BOSON_TEST_POOLER": self.mode}

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)  # immediate shutdown: server connections closed
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
