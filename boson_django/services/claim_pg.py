"""PostgreSQL fast path of admission: the common claim as one statement.

Most admitted jobs have no rate class and no ``max_active`` cap: nothing has to be
counted or charged before they run. For those, picking the candidates (``FOR UPDATE
SKIP LOCKED``, claim order), raising their fences, setting their leases and opening
their runs is one data-modifying statement -- one round trip, one commit, the store
clock read inside it. Candidates that do need a bucket or a cap are left untouched and
counted; :func:`boson_django.services.admission.admit` hands the slots they would have
taken to the general path, which makes the full decision for them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from boson_django import clock
from boson_django.drivers.postgresql import session
from boson_django.services.jobrows import JOB_COLUMNS, first_run

_RETURNED = ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))

#: A queue table's statistics are often stale (a burst of new jobs after ANALYZE saw
#: mostly finished ones); with bitmap scans allowed the planner then sorts every
#: available row on each claim instead of walking the claim index (70 ms against
#: 0.4 ms for 20,000 queued jobs, measured). Sequential scans off for the same reason:
#: a generic plan made while the run table was empty and analyzed checks each claimed
#: job's runs by reading the whole table (see :func:`jobrows.first_run`). The paused-queue
#: check still scans the (small) queue table, so the plan's cost carries the penalty
#: that disabling adds, which is above ``jit_above_cost``: JIT off, or each claim would
#: compile ~60 functions first.
_PLANNER = ("enable_bitmapscan = off", "enable_seqscan = off", "jit = off")

#: The claim of every queue keeps one generic plan instead of planning each call: with
#: ``plan_cache_mode = auto`` PostgreSQL kept choosing custom plans once more than a few
#: hundred jobs were queued (the generic plan's cost assumes a tenth of the candidates),
#: and planning this statement took 0.33-0.44 ms of the server per claim -- about as long
#: as executing a claim of ten. Safe for that statement only: with sequential and bitmap
#: scans off, the one order-giving index is the claim index, and the claimed rows are
#: found by key (``id = ANY(ARRAY(...))``), so no join order depends on statistics; a
#: plan made while the job table was empty, analyzed or never, still walks the claim
#: index (``tests/services/test_plans.py``). A claim of named queues keeps custom plans:
#: its generic plan walked the claim index past other queues' jobs with a filter
#: (11-25 ms per claim behind 50,000 jobs of another queue) where a custom plan takes
#: the per-queue index.
_GENERIC = ("plan_cache_mode = force_generic_plan",)


#: Whether a candidate is free is decided as the claim index walk meets it, below the row
#: locks: also for the rows other admitters hold, which the walk then skips. With four
#: worker processes at concurrency 10, ``boson_task_config`` was probed 20-23 times per
#: claim of ten (one process: 10), ~0.5 us of the server each (a locking scan of ten past
#: thirty held rows: 47 -> 33 us without the probes; past none, 16 -> 13.5 us). So the
#: probe per row is made only when some task has a cap at all: an uncorrelated ``EXISTS``,
#: run once per claim (the table holds a row per task an operator configured). Moving the probe above the locks instead (a CTE of the locked
#: rows) cost more than it saved when nothing is skipped (16 -> 19 us).
_CLAIM = """
WITH clk AS ({now}),
cand AS MATERIALIZED (
  SELECT j.id,
    j.rate_class IS NULL AND NOT (
      EXISTS (SELECT 1 FROM boson_task_config tc WHERE tc.max_active IS NOT NULL)
      AND EXISTS (SELECT 1 FROM boson_task_config tc WHERE tc.task = j.task AND tc.max_active IS NOT NULL)
    ) AS free
  FROM boson_job j
  WHERE j.state = 'available' AND j.queue NOT IN (SELECT name FROM boson_queue WHERE paused) {lanes}
  ORDER BY j.priority DESC, j.run_at, j.id
  LIMIT %s
  FOR UPDATE OF j SKIP LOCKED
),
claimed AS (
  UPDATE boson_job j SET state = 'running', fence = j.fence + 1, lease_holder = %s,
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


def claim_free(
    connection: Any, worker_id: str, lanes: Sequence[str], limit: int, lease_ms: int | None
) -> tuple[list[dict[str, Any]], int, Any]:
    """Claim up to ``limit`` jobs that need no bucket or cap, in claim order.

    Returns ``(rows, held, now)``: the claimed job rows (runs opened), how many
    candidates among the first ``limit`` need the general path, and the store time.
    """
    fetched = session.one_statement(
        connection, _claim_sql(len(lanes)), [*lanes, limit, worker_id, lease_ms, worker_id], planner=planner(len(lanes))
    )
    rows = [row for row in fetched if row["id"] is not None]  # in no order: admit() sorts the batch
    return rows, fetched[0]["held"], fetched[0]["store_now"]


def planner(lanes: int) -> tuple[str, ...]:
    """The settings the claim of ``lanes`` named queues (0: every queue) runs with."""
    return _PLANNER if lanes else _PLANNER + _GENERIC


@functools.cache
def _claim_sql(lanes: int) -> str:
    """The statement for ``lanes`` named queues (0: every queue); built on first use."""
    where = f"AND j.queue IN ({', '.join(['%s'] * lanes)})" if lanes else ""
    return _CLAIM.format(now=clock.PG_NOW, lanes=where, returned=_RETURNED, first_run=first_run("j"))
