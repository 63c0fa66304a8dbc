"""The driver interface: what the store asks of a database engine."""

from __future__ import annotations

from boson_django.drivers.acks import AckStatements
from boson_django.drivers.claim import ClaimStatements
from boson_django.drivers.clock import ClockStatements
from boson_django.drivers.control import ControlStatements
from boson_django.drivers.enqueue import EnqueueStatements
from boson_django.drivers.leases import LeaseStatements
from boson_django.drivers.session import Session
from boson_django.drivers.sweeps import SweepStatements


class Driver(
    Session, ClockStatements, EnqueueStatements, ClaimStatements,
    AckStatements, LeaseStatements, SweepStatements, ControlStatements,
):
    """One engine's statements. Subclasses override what their engine does differently;
    what is the same on every engine lives here once."""

    #: Django's ``connection.vendor`` this driver serves.
    vendor: str = ""

    #: Whether the worker flushes its acks on its loop's own thread (an engine that takes
    #: one writer at a time) rather than on an ack thread with a connection of its own.
    acks_inline: bool = False

    def lock_rows(self) -> str:
        """SQL suffix that locks the selected rows until commit ("" where the engine locks
        the whole database for a write transaction)."""
        return ""

    def lock_rows_skip_locked(self) -> str:
        """:meth:`lock_rows`, skipping rows another transaction holds."""
        return ""

    def json_cast(self) -> str:
        """Cast appended to a JSON parameter in raw SQL."""
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"



