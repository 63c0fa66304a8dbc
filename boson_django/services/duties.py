"""Duties: singleton leases on named chores, decided on the store clock."""

from __future__ import annotations

from datetime import timedelta

from boson_django import clock, validation
from boson_django import database


@database.store_transaction
def claim_duty(name: str, holder: str, lease_ms: int, *, using: str | None = None) -> bool:
    """Take or extend the duty; ``False`` means someone else holds an unexpired lease.

    One compare-and-set upsert on store time, so a node with a skewed clock cannot steal
    a duty early. Idempotent for the current holder (it extends the lease).
    """
    name = validation.name(name, "name")
    holder = validation.name(holder, "holder", max_len=255)
    lease_ms = validation.whole(lease_ms, "lease_ms", minimum=1)
    connection = database.conn(using)
    now = clock.now(using)
    stamp = database.dt_param(connection, now)
    expires = database.dt_param(connection, now + timedelta(milliseconds=lease_ms))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO boson_duty (name, holder, expires_at, claimed_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, "
            "claimed_at = CASE WHEN boson_duty.holder = excluded.holder THEN boson_duty.claimed_at "
            "ELSE excluded.claimed_at END "
            "WHERE boson_duty.holder = excluded.holder OR boson_duty.expires_at <= %s RETURNING holder",
            [name, holder, expires, stamp, stamp],
        )
        return cursor.fetchone() is not None


@database.store_transaction
def release_duty(name: str, holder: str, *, using: str | None = None) -> None:
    """Expire the duty at once if ``holder`` holds it; a non-holder changes nothing."""
    name = validation.name(name, "name")
    holder = validation.name(holder, "holder", max_len=255)
    connection = database.conn(using)
    stamp = database.dt_param(connection, clock.now(using))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE boson_duty SET expires_at = %s WHERE name = %s AND holder = %s AND expires_at > %s",
            [stamp, name, holder, stamp],
        )
