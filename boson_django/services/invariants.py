"""find_problems(): the store checks its own invariants (as treebeard's find_problems does).

Each check is one query that should return nothing; a non-empty answer names the jobs that
break the rule. Tests run it after every race and crash scenario; operators run it with
``manage.py boson_check``.
"""

from __future__ import annotations

from dataclasses import dataclass

from boson_django.services import _db

_CHECKS: dict[str, str] = {
    "running job without a lease": (
        "SELECT id FROM boson_job WHERE state = 'running' "
        "AND (lease_holder IS NULL OR lease_expires_at IS NULL)"
    ),
    "lease left on a job that is not running": (
        "SELECT id FROM boson_job WHERE state <> 'running' "
        "AND (lease_holder IS NOT NULL OR lease_expires_at IS NOT NULL)"
    ),
    "running job without exactly one open run of its fence": (
        "SELECT j.id FROM boson_job j WHERE j.state = 'running' AND 1 <> "
        "(SELECT COUNT(*) FROM boson_run r WHERE r.job_id = j.id AND r.fence = j.fence "
        "AND r.finished_at IS NULL)"
    ),
    "open run of a job that is not running under that fence": (
        "SELECT r.job_id FROM boson_run r JOIN boson_job j ON j.id = r.job_id "
        "WHERE r.finished_at IS NULL AND (j.state <> 'running' OR r.fence <> j.fence)"
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
        "SELECT id FROM boson_job WHERE state IN ('completed', 'skipped', 'failed', 'cancelled') "
        "AND (finalized_at IS NULL OR expires_at IS NULL)"
    ),
    "quarantined job whose fingerprint is not registered": (
        "SELECT j.id FROM boson_job j LEFT JOIN boson_quarantined_fingerprint q "
        "ON q.fingerprint = j.fingerprint WHERE j.state = 'quarantined' AND q.fingerprint IS NULL"
    ),
}


@dataclass(frozen=True)
class Problem:
    rule: str
    job_ids: list[str]

    def __str__(self) -> str:
        shown = ", ".join(self.job_ids[:10]) + (" ..." if len(self.job_ids) > 10 else "")
        return f"{self.rule}: {len(self.job_ids)} job(s): {shown}"


def find_problems(*, using: str | None = None) -> list[Problem]:
    """Every broken invariant, with the jobs that break it; empty when the store is sound."""
    connection = _db.conn(using)
    found: list[Problem] = []
    with connection.cursor() as cursor:
        for rule, sql in _CHECKS.items():
            cursor.execute(sql)
            ids = sorted({str(row[0]) for row in cursor.fetchall()})
            if ids:
                found.append(Problem(rule, ids))
    return found
