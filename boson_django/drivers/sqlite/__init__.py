"""The SQLite driver: one writer at a time (``BEGIN IMMEDIATE``), the whole file locked
instead of rows."""

from __future__ import annotations

from boson_django.drivers.base import Driver
from boson_django.drivers.sqlite.acks import SQLiteAcks
from boson_django.drivers.sqlite.session import SQLiteSession


class SQLiteDriver(SQLiteSession, SQLiteAcks, Driver):
    vendor = "sqlite"
    acks_inline = True


DRIVER = SQLiteDriver()
