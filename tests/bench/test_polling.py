"""The drains are polled through ``common.scalar`` every 50 ms: on one kept connection per
database (a connection per poll forked a server backend each time, CPU taken from the
system measured), made again when it broke."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests import databases

COMMON = Path(__file__).resolve().parents[2] / "bench" / "common.py"


def _common(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_common_under_test", COMMON)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_common_under_test", module)
    spec.loader.exec_module(module)
    pg = settings.DATABASES["default"]
    monkeypatch.setattr(module, "PG", {"host": pg["HOST"], "port": int(pg["PORT"]), "user": pg["USER"]})
    return module


@pytest.mark.postgres
def test_polls_share_one_connection_and_survive_the_database_being_made_again(monkeypatch):
    common = _common(monkeypatch)
    name = databases.name("poll")
    common.fresh_database(name)
    try:
        pids = {common.scalar(name, "SELECT pg_backend_pid()") for _ in range(5)}
        assert len(pids) == 1  # one backend answered every poll

        common.fresh_database(name)  # DROP ... WITH (FORCE) ends the kept connection
        after = common.scalar(name, "SELECT pg_backend_pid()")
        assert after not in pids
        assert common.scalar(name, "SELECT 41 + 1") == 42
    finally:
        for conn in common._SCALAR_CONNECTIONS.values():
            conn.close()
        databases.drop(name)
