"""admit: the whole admission decision.

Skip paused queues, respect per-task ``max_active``, take bucket tokens, claim by
priority then age, open runs, set leases. Statements per batch are bounded (at most
three candidate rounds), never one per job. The statements are the engine driver's
(:mod:`boson_django.drivers.claim`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boson_django import clock, transitions, validation
from boson_django import database, drivers
from boson_django.drivers import guards
from boson_django.states import JobState
from boson_django.services import history
from boson_django.services.buckets import Buckets
from boson_django.services.jobrows import UNREADABLE, decoded, envelope_from_row
from boson_django.services.types import AdmissionUnit, LeaseRef

MAX_ROUNDS = 3


class _ActiveLimits:
    """Per-task ``max_active``: the TaskConfig rows are locked so two admitters cannot both
    see the last free slot."""

    def __init__(self, using: str):
        self.using = using
        self.free: dict[str, int | None] = {}

    def load(self, tasks: set[str], *, wait: bool = True) -> None:
        """Lock the caps of ``tasks``; ``wait=False`` treats caps another admitter holds as full."""
        unknown = sorted(t for t in tasks if t not in self.free)
        if not unknown:
            return
        with database.conn(self.using).cursor() as cursor:
            rows, busy = database.lock_by_key(
                cursor, "boson_task_config", "task", "max_active", unknown, wait=wait,
                where="max_active IS NOT NULL",
            )
            limits = {**dict(rows), **{task: 0 for task in busy}}  # held elsewhere: no slot now
            running = self._running(sorted(limits), cursor)
        for task in unknown:
            self.free[task] = limits[task] - running.get(task, 0) if task in limits else None

    @staticmethod
    def _running(tasks: list[str], cursor: Any) -> dict[str, int]:
        if not tasks:
            return {}
        cursor.execute(
            f"SELECT task, COUNT(*) FROM boson_job WHERE {guards.among([JobState.RUNNING])} "
            f"AND task IN ({database.placeholders(tasks)}) GROUP BY task",
            tasks,
        )
        return dict(cursor.fetchall())

    def try_take(self, task: str) -> bool:
        free = self.free.get(task)
        if free is None:
            return True
        if free <= 0:
            return False
        self.free[task] = free - 1
        return True

    def give_back(self, task: str) -> None:
        if self.free.get(task) is not None:
            self.free[task] += 1  # type: ignore[operator]


def admit(
    worker_id: str,
    queues: Sequence[str] | None,
    limit: int,
    *,
    lease_ms: int | None = None,
    using: str | None = None,
) -> list[AdmissionUnit]:
    """Claim up to ``limit`` available jobs for ``worker_id``.

    Locks the claimed rows (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so concurrent
    admitters take disjoint jobs), the buckets of their rate classes and the TaskConfig
    rows that cap ``max_active``. Accepts only ``available`` jobs; each claim raises the
    job's fence by one. ``queues`` empty or None means every queue. Jobs held back by one
    rate class or task cap do not block others. Not idempotent: each call claims anew.

    Where the driver claims the jobs that need no bucket or cap in one statement
    (:meth:`~boson_django.drivers.claim.ClaimStatements.claim_free`, its own transaction
    unless the caller has one), it does so first; the general path runs after it only
    when candidates needing one were met, and alone where the driver has no such claim.
    """
    worker_id = validation.name(worker_id, "worker_id", max_len=255)
    limit = validation.whole(limit, "limit")
    lease_ms = validation.optional_whole(lease_ms, "lease_ms", minimum=1)
    names = [validation.name(q, "queues") for q in (queues or [])]
    if limit == 0:
        return []
    db = database.alias(using)
    connection = database.conn(db)
    free = drivers.for_connection(connection).claim_free(connection, worker_id, names, limit, lease_ms)
    if free is None:
        return _admit(worker_id, names, limit, lease_ms=lease_ms, using=db)
    units = [_unit(row) for row in free.rows]
    transitions.admitted(units, free.now, db)
    if free.held and len(units) < limit:
        units += _admit(worker_id, names, limit - len(units), lease_ms=lease_ms, using=db)
    units.sort(key=_claim_order)  # RETURNING has no order; one batch, whichever path claimed each
    return units


def _claim_order(unit: AdmissionUnit) -> tuple[int, Any, str]:
    """The order jobs are picked in, so the batch is started in that order."""
    env = unit.envelope
    return -(env.priority or 0), env.run_at, env.id or ""


#: Parameters the claim's statement binds per job (its id three times, expiry, charge)
#: and besides them: a claim lists no more jobs than the engine lets one statement bind.
_BOUND_PER_CLAIM, _BOUND_BESIDES_CLAIMS = 5, 8


@database.store_transaction
def _admit(
    worker_id: str, queues: list[str], limit: int, *, lease_ms: int | None, using: str
) -> list[AdmissionUnit]:
    """The general path: buckets and caps decide, candidate by candidate, in bounded rounds."""
    limit = min(limit, database.most_listed(database.conn(using), each=_BOUND_PER_CLAIM, besides=_BOUND_BESIDES_CLAIMS))
    now = clock.now(using)
    buckets, caps = Buckets(using, now), _ActiveLimits(using)
    picked = _pick(using, queues, limit, buckets, caps)
    if not picked:
        buckets.save()
        return []
    # The claim's time, read again now that the jobs are locked: a later round may pick a
    # job that a reclaim or release handed back while this one waited for bucket or cap
    # locks, and the time read before that wait would start its claim before the last
    # one ended and shorten its lease by the wait (to nothing, if the wait was longer).
    # The buckets are saved as of that time too, or the tokens of the wait would be
    # earned again by the next admitter: two bucketfuls of claims started at one instant.
    now = clock.now(using)
    buckets.catch_up(now)
    buckets.save()
    connection = database.conn(using)
    rows = drivers.for_connection(connection).claim_picked(connection, picked, worker_id, now, lease_ms)
    history.open_runs(rows, worker_id, now, using)
    units = [_unit(row) for row in rows]
    transitions.admitted(units, now, using)
    return units


def _pick(
    using: str, queues: list[str], limit: int, buckets: Buckets, caps: _ActiveLimits
) -> list[dict[str, Any]]:
    picked: list[dict[str, Any]] = []
    blocked_classes: set[str] = set()
    blocked_tasks: set[str] = set()
    for round_no in range(MAX_ROUNDS):
        need = limit - len(picked)
        taken = [c["id"] for c in picked]
        connection = database.conn(using)
        found = drivers.for_connection(connection).claim_candidates(
            connection, queues, blocked_classes, blocked_tasks, taken, need)
        # Only the first round waits for locks (buckets, then caps, each in name order);
        # later rounds already hold some and must not wait for more: no lock-order cycles.
        buckets.load({c["rate_class"] for c in found if c["rate_class"]}, wait=round_no == 0)
        caps.load({c["task"] for c in found}, wait=round_no == 0)
        for cand in found:
            if cand["task"] in blocked_tasks or cand["rate_class"] in blocked_classes:
                continue
            if not caps.try_take(cand["task"]):
                blocked_tasks.add(cand["task"])
            elif not buckets.try_take(cand["rate_class"], cand["weight"]):
                caps.give_back(cand["task"])
                blocked_classes.add(cand["rate_class"])
            else:
                cand["charged"] = cand["weight"] if buckets.is_limited(cand["rate_class"]) else 0.0
                picked.append(cand)
        if len(found) < need or len(picked) >= limit:
            break
    return picked


def _unit(row: dict[str, Any]) -> AdmissionUnit:
    return AdmissionUnit(
        lease=LeaseRef(row["id"], row["fence"]),
        envelope=envelope_from_row(row),
        attempt=row["attempt"],
        crash_attempt=row["crash_attempt"],
        checkpoint=decoded(row["checkpoint"], UNREADABLE),
        lease_expires_at=database.dt_not_null(row["lease_expires_at"]),
        enqueued_at=database.dt_value(row["enqueued_at"]),
        started_at=database.dt_value(row["started_at"]),
        attempted_at=database.dt_value(row["attempted_at"]),
        first_run=bool(row["first_run"]),
    )

