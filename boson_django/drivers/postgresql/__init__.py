"""The PostgreSQL driver: row locks with ``SKIP LOCKED``, ``jsonb``, single-statement
transitions."""

from __future__ import annotations

from boson_django.drivers.base import Driver
from boson_django.drivers.postgresql.acks import PostgresAcks
from boson_django.drivers.postgresql.claim import PostgresClaims
from boson_django.drivers.postgresql.clock import PostgresClock
from boson_django.drivers.postgresql.enqueue import PostgresEnqueue
from boson_django.drivers.postgresql.session import PostgresSession


class PostgresDriver(PostgresSession, PostgresClock, PostgresEnqueue, PostgresClaims, PostgresAcks, Driver):
    vendor = "postgresql"

    def lock_rows(self) -> str:
        return " FOR UPDATE"

    def lock_rows_skip_locked(self) -> str:
        return " FOR UPDATE SKIP LOCKED"

    def json_cast(self) -> str:
        return "::jsonb"


DRIVER = PostgresDriver()
