"""Token buckets of rate classes, locked and refilled on the store clock."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from boson_django import clock, validation
from boson_django.models import Bucket
from boson_django.policies import BucketState
from boson_django import database
from boson_django.services import wakeups


class Buckets:
    """The buckets one transaction touches: locked on first use, written back once."""

    def __init__(self, using: str, now: datetime):
        self.using = using
        self.now = now
        self.loaded: dict[str, BucketState | None] = {}
        self.busy: set[str] = set()
        self.taken: dict[str, float] = {}

    def load(self, names: set[str], *, wait: bool = True) -> None:
        """Lock (PostgreSQL: FOR UPDATE, in name order) and refill the named buckets.

        ``wait=False`` skips buckets another transaction holds and marks them busy (no
        tokens this time): a caller already holding locks must not wait for more, or two
        admitters locking in different rounds could deadlock.
        """
        wanted = sorted(n for n in names if n and n not in self.loaded and n not in self.busy)
        if not wanted:
            return
        with database.conn(self.using).cursor() as cursor:
            rows, busy = database.lock_by_key(
                cursor, "boson_bucket", "name", '"limit", window_ms, burst, tokens, refilled_at', wanted, wait=wait
            )
        for name, limit, window_ms, burst, tokens, refilled_at in rows:
            state = BucketState(limit, window_ms, burst, tokens, database.dt_not_null(refilled_at))
            state.refill(self.now)
            self.loaded[name] = state
        self.busy.update(busy)
        for name in wanted:
            if name not in self.busy:
                self.loaded.setdefault(name, None)  # unconfigured: unlimited

    def is_limited(self, name: str | None) -> bool:
        return bool(name) and (self.loaded.get(name) is not None or name in self.busy)  # type: ignore[arg-type]

    def try_take(self, name: str | None, weight: float) -> bool:
        if name in self.busy:
            return False
        state = self.loaded.get(name) if name else None
        if state is None:
            return True
        if not state.try_take(weight):
            return False
        self.taken[name] = self.taken.get(name, 0.0) + weight  # type: ignore[index]
        return True

    def catch_up(self, now: datetime) -> None:
        """The takes were decided at ``self.now``, their claims start at the later ``now``:
        save the buckets as if decided then, so the next admitter at ``now`` does not
        earn the tokens of the time between again (see :meth:`BucketState.refill`)."""
        for name, state in self.loaded.items():
            if state is not None:
                state.refill(now, spent=self.taken.get(name, 0.0))
        self.now = now

    def give(self, name: str | None, tokens: float) -> None:
        """Refund (or, negative, charge more); never above capacity."""
        state = self.loaded.get(name) if name else None
        if state is not None:
            state.tokens = min(float(state.capacity), state.tokens + tokens)

    def reconcile(self, name: str | None, charged: float, actual: float | None) -> float:
        """Correct an admission charge with the weight the handler reports (refund or
        charge the difference; saved by :meth:`save`); returns the new charge."""
        if actual is None or not name:
            return charged
        self.load({name})
        self.give(name, charged - actual)
        return actual

    def ms_until(self, name: str | None, weight: float) -> int | None:
        """How long until the named bucket holds ``weight`` again; None if unconfigured."""
        if name:
            self.load({name})
        state = self.loaded.get(name) if name else None
        return None if state is None else state.ms_until(weight)

    def save(self) -> None:
        connection = database.conn(self.using)
        with connection.cursor() as cursor:
            for name, state in self.loaded.items():
                if state is not None:
                    cursor.execute(
                        "UPDATE boson_bucket SET tokens = %s, refilled_at = %s WHERE name = %s",
                        [state.tokens, database.dt_param(connection, state.refilled_at), name],
                    )


def reconcile(
    using: str, now: datetime, rate_class: str | None, charged: float, actual: float | None
) -> float:
    """:meth:`Buckets.reconcile` for a transaction that touches this one bucket (a
    release, a cancel), saved at once."""
    held = Buckets(using, now)
    charge = held.reconcile(rate_class, charged, actual)
    held.save()
    return charge


@database.store_transaction
def set_rate_limit(
    name: str, limit: int, window_ms: int, burst: int = 0, *, using: str | None = None
) -> Bucket:
    """Create or retune a rate class's bucket. A new bucket starts full; a retuned one keeps
    its tokens (capped at the new capacity). Idempotent, also when two operators create
    the same bucket at once: the second waits for the first one's row and retunes it
    (a plain lookup then insert failed with ``IntegrityError`` on PostgreSQL)."""
    validation.name(name, "name")
    limit = validation.whole(limit, "limit", minimum=1)
    window_ms = validation.whole(window_ms, "window_ms", minimum=1)
    burst = validation.whole(burst, "burst", minimum=0)
    now = clock.now(using)
    capacity = burst or limit
    bucket, created = Bucket.objects.using(using).select_for_update().get_or_create(
        name=name, defaults={"limit": limit, "window_ms": window_ms, "burst": burst, "tokens": capacity, "refilled_at": now}
    )
    wakeups.notify_at_commit([wakeups.ANY_QUEUE], using)  # a new or larger bucket may let waiting jobs through
    if created:
        return bucket
    state = BucketState(bucket.limit, bucket.window_ms, bucket.burst, bucket.tokens, bucket.refilled_at)
    state.refill(now)
    bucket.limit, bucket.window_ms, bucket.burst = limit, window_ms, burst
    bucket.tokens, bucket.refilled_at = min(state.tokens, float(capacity)), state.refilled_at
    bucket.save(using=using)
    return bucket


@database.store_transaction
def delete_rate_limit(name: str, *, using: str | None = None) -> bool:
    """Delete a rate class's bucket: the class is unlimited again, as a class that was
    never configured is. ``False`` when it had none. Idempotent.

    Nothing keeps buckets in memory: every admission that meets a job of a rate class
    reads (and locks) its bucket, so the next one admits the class unlimited. An
    admission holding the bucket's lock finishes first. A running job's charge is not
    refunded anywhere (there is no bucket to refund); ``set_rate_limit`` later makes a
    fresh, full bucket.
    """
    validation.name(name, "name")
    deleted, _ = Bucket.objects.using(using).filter(name=name).delete()
    if deleted:
        wakeups.notify_at_commit([wakeups.ANY_QUEUE], using)  # the class is unlimited now
    return deleted > 0


def bucket_tokens(name: str, *, using: str | None = None) -> float | None:
    """Tokens a bucket holds now on the store clock (read-only; None if unconfigured)."""
    bucket: Any = Bucket.objects.using(database.alias(using)).filter(name=name).first()
    if bucket is None:
        return None
    state = BucketState(bucket.limit, bucket.window_ms, bucket.burst, bucket.tokens, bucket.refilled_at)
    state.refill(clock.now(using))
    return state.tokens
