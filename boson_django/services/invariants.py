"""find_problems(): the store checks its own invariants (as treebeard's find_problems does).

Each check is one query that should return nothing; a non-empty answer names the jobs that
break the rule. Tests run it after every race and crash scenario; operators run it with
``manage.py boson_check``. Besides the shape of live rows (leases, open runs), the run
history is checked: a job's fences only grow, no two claims of a job overlap on the store
clock, ``attempt`` counts exactly the handler outcomes and ``crash_attempt`` exactly the
lease losses (since the last release from quarantine). The history checks read every
run, so on a large store they cost a scan: run them when looking, not in a hot loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from boson_django import clock, validation
from boson_django import database
from boson_django.drivers.guards import among
from boson_django.states import ATTEMPT_SPENDING, LEASED, TERMINAL, JobState, Outcome

#: Run outcomes that spend an attempt: ``attempt`` moves on these and nothing else.
_SPENDING = ", ".join(f"'{o.value}'" for o in sorted(ATTEMPT_SPENDING, key=lambda o: o.value))

_LEASED, _NOT_LEASED = among(LEASED), among(LEASED, negate=True)
_J_LEASED, _J_NOT_LEASED = among(LEASED, "j.state"), among(LEASED, "j.state", negate=True)

_CHECKS: dict[str, str] = {
    "running job without a lease": (
        f"SELECT id FROM boson_job WHERE {_LEASED} "
        "AND (lease_holder IS NULL OR lease_expires_at IS NULL)"
    ),
    "lease left on a job that is not running": (
        f"SELECT id FROM boson_job WHERE {_NOT_LEASED} "
        "AND (lease_holder IS NOT NULL OR lease_expires_at IS NOT NULL)"
    ),
    "running job without exactly one open run of its fence": (
        f"SELECT j.id FROM boson_job j WHERE {_J_LEASED} AND 1 <> "
        "(SELECT COUNT(*) FROM boson_run r WHERE r.job_id = j.id AND r.fence = j.fence "
        "AND r.finished_at IS NULL)"
    ),
    "open run of a job that is not running under that fence": (
        "SELECT r.job_id FROM boson_run r JOIN boson_job j ON j.id = r.job_id "
        f"WHERE r.finished_at IS NULL AND ({_J_NOT_LEASED} OR r.fence <> j.fence)"
    ),
    "run with a fence the job never had": (
        "SELECT r.job_id FROM boson_run r JOIN boson_job j ON j.id = r.job_id WHERE r.fence > j.fence"
    ),
    "two runs of one job with the same fence": (
        "SELECT job_id FROM boson_run WHERE worker_id <> '' GROUP BY job_id, fence HAVING COUNT(*) > 1"
    ),
    "run or data of a job that no longer exists": (
        "SELECT r.job_id FROM boson_run r LEFT JOIN boson_job j ON j.id = r.job_id WHERE j.id IS NULL "
        "UNION SELECT d.job_id FROM boson_job_data d LEFT JOIN boson_job j ON j.id = d.job_id WHERE j.id IS NULL"
    ),
    "attempt beyond max_attempts": "SELECT id FROM boson_job WHERE attempt > max_attempts",
    "finished job without finalized_at": (
        f"SELECT id FROM boson_job WHERE {among(TERMINAL)} "
        "AND (finalized_at IS NULL OR expires_at IS NULL)"
    ),
    # -- history: fences, holders, attempt and crash accounting --------------------------
    "fence that did not grow between two claims": (
        "SELECT r.job_id FROM boson_run r JOIN boson_run p ON p.job_id = r.job_id AND p.id < r.id "
        "AND p.worker_id <> '' WHERE r.worker_id <> '' AND p.fence >= r.fence"
    ),
    "two claims of one job held at once": (
        "SELECT r.job_id FROM boson_run r JOIN boson_run p ON p.job_id = r.job_id AND p.fence < r.fence "
        "AND p.worker_id <> '' WHERE r.worker_id <> '' AND (p.finished_at IS NULL OR p.finished_at > r.started_at)"
    ),
    "attempt that differs from the handler outcomes its runs record": (
        "SELECT j.id FROM boson_job j WHERE j.attempt <> (SELECT COUNT(*) FROM boson_run r "
        f"WHERE r.job_id = j.id AND r.outcome IN ({_SPENDING}))"
    ),
    "crash_attempt that differs from the lease losses since the last quarantine release": (
        "SELECT j.id FROM boson_job j WHERE j.crash_attempt <> (SELECT COUNT(*) FROM boson_run r "
        f"WHERE r.job_id = j.id AND r.outcome = '{Outcome.LEASE_LOST.value}' AND r.id > COALESCE((SELECT MAX(u.id) "
        "FROM boson_run u WHERE u.job_id = j.id AND u.outcome = 'unquarantined'), 0))"
    ),
    "quarantined job whose fingerprint is not registered": (
        "SELECT j.id FROM boson_job j LEFT JOIN boson_quarantined_fingerprint q "
        f"ON q.fingerprint = j.fingerprint WHERE {among({JobState.QUARANTINED}, 'j.state')} AND q.fingerprint IS NULL"
    ),
}


@dataclass(frozen=True)
class Problem:
    rule: str
    job_ids: list[str]

    def __str__(self) -> str:
        shown = ", ".join(self.job_ids[:10]) + (" ..." if len(self.job_ids) > 10 else "")
        return f"{self.rule}: {len(self.job_ids)} job(s): {shown}"


def find_problems(*, stranded_after_ms: int | None = None, using: str | None = None) -> list[Problem]:
    """Every broken invariant, with the jobs that break it; empty when the store is sound.

    ``stranded_after_ms`` also reports running jobs whose lease expired more than that
    long ago on the store clock -- jobs no reclaimer picked up (0 right after a reclaim
    pass; a few sweep intervals for a live store).
    """
    connection = database.conn(using)
    checks = list(_CHECKS.items())
    params: dict[str, list[Any]] = {}
    if stranded_after_ms is not None:
        limit = clock.now(using) - timedelta(milliseconds=validation.whole(stranded_after_ms, "stranded_after_ms"))
        rule = f"running job whose lease expired more than {stranded_after_ms} ms ago (stranded)"
        checks.append((rule, f"SELECT id FROM boson_job WHERE {_LEASED} AND lease_expires_at < %s"))
        params[rule] = [database.dt_param(connection, limit)]
    found: list[Problem] = []
    with connection.cursor() as cursor:
        for rule, sql in checks:
            cursor.execute(sql, params.get(rule, ()))
            ids = sorted({str(row[0]) for row in cursor.fetchall()})
            if ids:
                found.append(Problem(rule, ids))
    return found
