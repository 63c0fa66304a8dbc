"""admit: the whole admission decision in one transaction.

Skip paused queues, respect per-task ``max_active``, take bucket tokens, claim by
priority then age, open runs, set leases. Statements per batch are bounded (at most
three candidate rounds), never one per job.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from boson_django import clock, transitions, validation
from boson_django import database, drivers
from boson_django.services import claim_pg, history
from boson_django.services.buckets import Buckets
from boson_django.services.jobrows import JOB_COLUMNS, UNREADABLE, decoded, envelope_from_row, first_run
from boson_django.services.types import AdmissionUnit, LeaseRef

MAX_ROUNDS = 3
#: Returned with each claimed row besides the envelope: times, and whether the job had runs.
_EXTRA = f"enqueued_at, started_at, attempted_at, {first_run('boson_job')}"


class _ActiveLimits:
    """Per-task ``max_active``: the TaskConfig rows are locked so two admitters cannot both
    see the last free slot."""

    def __init__(self, using: str):
        self.using = using
        self.free: dict[str, int | None] = {}

    def load(self, tasks: set[str], *, wait: bool = True) -> None:
        """Lock the caps of ``tasks``; ``wait=False`` treats caps another admitter holds as full."""
        wanted = sorted(t for t in tasks if t not in self.free)
        if not wanted:
            return
        with database.conn(self.using).cursor() as cursor:
            rows, busy = database.lock_by_key(
                cursor, "boson_task_config", "task", "max_active", wanted, wait=wait,
                where="max_active IS NOT NULL",
            )
            limits = {**dict(rows), **{task: 0 for task in busy}}  # held elsewhere: no slot now
            running = self._running(sorted(limits), cursor)
        for task in wanted:
            self.free[task] = limits[task] - running.get(task, 0) if task in limits else None

    @staticmethod
    def _running(tasks: list[str], cursor: Any) -> dict[str, int]:
        if not tasks:
            return {}
        cursor.execute(
            "SELECT task, COUNT(*) FROM boson_job WHERE state = 'running' "
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

    On PostgreSQL the jobs that need no bucket or cap are claimed by one statement
    (:mod:`~boson_django.services.claim_pg`, its own transaction unless the caller has
    one); only when candidates needing one were met does the general path run after it.
    """
    worker_id = validation.name(worker_id, "worker_id", max_len=255)
    limit = validation.whole(limit, "limit")
    lease_ms = validation.optional_whole(lease_ms, "lease_ms", minimum=1)
    wanted = [validation.name(q, "queues") for q in (queues or [])]
    if limit == 0:
        return []
    db = database.alias(using)
    connection = database.conn(db)
    if not database.is_postgres(connection):
        return _admit(worker_id, wanted, limit, lease_ms=lease_ms, using=db)
    rows, held, now = claim_pg.claim_free(connection, worker_id, wanted, limit, lease_ms)
    units = [_unit(row) for row in rows]
    transitions.admitted(units, now, db)
    if held and len(units) < limit:
        units += _admit(worker_id, wanted, limit - len(units), lease_ms=lease_ms, using=db)
    units.sort(key=_claim_order)  # RETURNING has no order; one batch, whichever path claimed each
    return units


def _claim_order(unit: AdmissionUnit) -> tuple[int, Any, str]:
    """The order jobs are picked in, so the batch is started in that order."""
    env = unit.envelope
    return -(env.priority or 0), env.run_at, env.id or ""


#: Parameters the claim's statement binds per job (its id three times, expiry, charge)
#: and besides them. It lists the whole claim: where SQLite binds 999 parameters (before
#: 3.32) a claim of 200 jobs failed, and a worker with that many free slots never started
#: a job; fewer are claimed at once there.
_BOUND_PER_CLAIM, _BOUND_BESIDES_CLAIMS = 5, 8


@database.store_transaction
def _admit(
    worker_id: str, wanted: list[str], limit: int, *, lease_ms: int | None, using: str
) -> list[AdmissionUnit]:
    """The general path: buckets and caps decide, candidate by candidate, in bounded rounds."""
    limit = min(limit, database.most_listed(database.conn(using), each=_BOUND_PER_CLAIM, besides=_BOUND_BESIDES_CLAIMS))
    now = clock.now(using)
    buckets, caps = Buckets(using, now), _ActiveLimits(using)
    picked = _pick(using, wanted, limit, buckets, caps)
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
    rows = _claim(using, picked, worker_id, now, lease_ms, buckets)
    history.open_runs(rows, worker_id, now, using)
    units = [_unit(row) for row in rows]
    transitions.admitted(units, now, using)
    return units


def _pick(
    using: str, lanes: list[str], limit: int, buckets: Buckets, caps: _ActiveLimits
) -> list[dict[str, Any]]:
    picked: list[dict[str, Any]] = []
    blocked_classes: set[str] = set()
    blocked_tasks: set[str] = set()
    for round_no in range(MAX_ROUNDS):
        need = limit - len(picked)
        taken = [c["id"] for c in picked]
        found = _candidates(using, lanes, blocked_classes, blocked_tasks, taken, need)
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


def _candidates(
    using: str, lanes: list[str], blocked_classes: set[str],
    blocked_tasks: set[str], taken: list[str], need: int,
) -> list[dict[str, Any]]:
    """Claimable rows in claim order; paused queues are skipped by a subquery (no round
    trip of its own)."""
    connection = database.conn(using)
    where = ["state = 'available'", "queue NOT IN (SELECT name FROM boson_queue WHERE paused)"]
    params: list[Any] = []
    if lanes:
        where.append(f"queue IN ({database.placeholders(lanes)})")
        params += lanes
    if blocked_classes:
        where.append(f"(rate_class IS NULL OR rate_class NOT IN ({database.placeholders(blocked_classes)}))")
        params += sorted(blocked_classes)
    if blocked_tasks:
        where.append(f"task NOT IN ({database.placeholders(blocked_tasks)})")
        params += sorted(blocked_tasks)
    if taken:
        where.append(f"id NOT IN ({database.placeholders(taken)})")
        params += taken
    sql = (
        "SELECT id, task, rate_class, weight, lease_ms FROM boson_job "
        f"WHERE {' AND '.join(where)} ORDER BY priority DESC, run_at, id LIMIT %s"
        f"{drivers.for_connection(connection).lock_rows_skip_locked()}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params + [need])
        return database.fetch_dicts(cursor)


def _claim(
    using: str, picked: list[dict[str, Any]], worker_id: str, now: datetime,
    lease_ms: int | None, buckets: Buckets,
) -> list[dict[str, Any]]:
    """One UPDATE for the batch; per-job lease expiry and charge come from CASE lists."""
    connection = database.conn(using)
    expiry_cases, charge_cases, params_e, params_c, ids = [], [], [], [], []
    for cand in picked:
        expires = now + timedelta(milliseconds=lease_ms or cand["lease_ms"])
        expiry_cases.append("WHEN %s THEN %s")
        params_e += [cand["id"], database.dt_param(connection, expires)]
        charge_cases.append("WHEN %s THEN %s")
        params_c += [cand["id"], cand["charged"]]
        ids.append(cand["id"])
    stamp = database.dt_param(connection, now)
    sql = (
        "UPDATE boson_job SET state = 'running', fence = fence + 1, lease_holder = %s, "
        f"lease_expires_at = CASE id {' '.join(expiry_cases)} END, "
        f"charged_weight = CASE id {' '.join(charge_cases)} END, "
        "started_at = COALESCE(started_at, %s), attempted_at = %s "
        f"WHERE id IN ({database.placeholders(ids)}) AND {database.in_state('available')} RETURNING {JOB_COLUMNS}, {_EXTRA}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [worker_id, *params_e, *params_c, stamp, stamp, *ids])
        rows = database.fetch_dicts(cursor)
    order = {job_id: i for i, job_id in enumerate(ids)}
    rows.sort(key=lambda r: order[r["id"]])
    return rows


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

