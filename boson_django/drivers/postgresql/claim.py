"""PostgreSQL's claim of free jobs: picking, fencing, leasing and opening runs in one
statement.

Candidates are picked in claim order with ``FOR UPDATE SKIP LOCKED``, so concurrent
admitters take disjoint jobs. Those that need a bucket (a rate class) or a ``max_active``
cap are left untouched and counted as ``held``: the general path decides them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django.drivers import guards
from boson_django.drivers.claim import JOB_COLUMNS, ClaimStatements, FreeClaim, first_run
from boson_django.drivers.postgresql import session
from boson_django.drivers.postgresql.clock import STORE_NOW
from boson_django.states import Event, JobState

_RETURNED = ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))

#: Planner settings of the claim: the claim index is the only plan that stays fast when
#: the queue table's statistics are stale (bitmap and sequential scans off); JIT off, as
#: the cost the disabled scans add would otherwise compile the statement on each claim.
_PLANNER = ("enable_bitmapscan = off", "enable_seqscan = off", "jit = off")

#: The claim of every queue keeps one generic plan (safe with the scans above off: the
#: claim index is the one order-giving index, and claimed rows are found by key). A
#: claim of named queues keeps custom plans, which take the per-queue index.
_GENERIC = ("plan_cache_mode = force_generic_plan",)

#: ``free``: no rate class, and no cap on its task (the per-row probe runs only when some
#: task has a cap at all).
_CLAIM = """
WITH clk AS ({now}),
cand AS MATERIALIZED (
  SELECT j.id,
    j.rate_class IS NULL AND NOT (
      EXISTS (SELECT 1 FROM boson_task_config tc WHERE tc.max_active IS NOT NULL)
      AND EXISTS (SELECT 1 FROM boson_task_config tc WHERE tc.task = j.task AND tc.max_active IS NOT NULL)
    ) AS free
  FROM boson_job j
  WHERE {available} AND j.queue NOT IN (SELECT name FROM boson_queue WHERE paused) {queues}
  ORDER BY j.priority DESC, j.run_at, j.id
  LIMIT %s
  FOR UPDATE OF j SKIP LOCKED
),
claimed AS (
  UPDATE boson_job j SET state = {running}, fence = j.fence + 1, lease_holder = %s,
    lease_expires_at = clk.now + COALESCE(%s, j.lease_ms) * INTERVAL '1 millisecond',
    charged_weight = 0, started_at = COALESCE(j.started_at, clk.now), attempted_at = clk.now
  FROM clk
  WHERE j.id = ANY(ARRAY(SELECT id FROM cand WHERE free))
  RETURNING {returned}, j.enqueued_at, j.started_at, j.attempted_at,
    {first_run}
),
runs AS (
  INSERT INTO boson_run (job_id, task, queue, attempt, fence, worker_id, started_at, finished_at,
                         outcome, error, logs, recorded)
  SELECT id, task, queue, attempt + 1, fence, %s, attempted_at, NULL, '', '', '[]'::jsonb, FALSE
  FROM claimed
)
SELECT claimed.*, clk.now AS store_now, (SELECT COUNT(*) FROM cand WHERE NOT cand.free) AS held
FROM clk LEFT JOIN claimed ON TRUE
"""


class PostgresClaims(ClaimStatements):
    def claim_free(
        self, connection: BaseDatabaseWrapper, worker_id: str, queues: Sequence[str], limit: int, lease_ms: int | None
    ) -> FreeClaim:
        """Claim up to ``limit`` jobs that need no bucket or cap, in claim order, opening
        their runs; ``held`` counts the candidates among the first ``limit`` that need the
        general path. Its own transaction unless the caller has one."""
        fetched = session.one_statement(
            connection, claim_sql(len(queues)), [*queues, limit, worker_id, lease_ms, worker_id],
            planner=planner(len(queues)),
        )
        rows = [row for row in fetched if row["id"] is not None]
        return FreeClaim(rows, fetched[0]["held"], fetched[0]["store_now"])


def planner(queues: int) -> tuple[str, ...]:
    """The settings the claim of ``queues`` named queues (0: every queue) runs with."""
    return _PLANNER if queues else _PLANNER + _GENERIC


@functools.cache
def claim_sql(queues: int) -> str:
    """The statement for ``queues`` named queues (0: every queue); built on first use."""
    where = f"AND j.queue IN ({', '.join(['%s'] * queues)})" if queues else ""
    return _CLAIM.format(
        available=guards.allowed(Event.ADMIT, "j.state"), running=guards.state(JobState.RUNNING), now=STORE_NOW, queues=where, returned=_RETURNED, first_run=first_run("j"))
