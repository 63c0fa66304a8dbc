"""PostgreSQL's ack statements: the plain-success batch as one statement.

A batch of plain successes (no error, no log lines, no weight correction, a job that
keeps its row) is completed by one data-modifying statement: it completes the jobs whose
lease holds, closes their runs, stores their results and counts them, one round trip
and one commit. The jobs' update takes their row locks (in id order) with the lease
checks in its own ``WHERE``; PostgreSQL re-checks them on the newest version of a row
another transaction changed meanwhile (a reclaim, a cancel), so a lost race is a job the
statement does not match: nothing of it is written, and the caller sends it down the
general path, which says why. Not idempotent: a second batch finds the leases ended.
Why the statement is shaped as it is: docs/performance.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.drivers.acks import AckStatements, Completed
from boson_django.drivers.postgresql.clock import STORE_NOW
from boson_django.drivers.postgresql.session import one_statement
from boson_django.states import JobState, Outcome

#: Planner settings of the statement: sequential scans off (each row is found by key,
#: whatever the statistics say) and JIT off.
_PLANNER = ("enable_seqscan = off", "jit = off")

#: Every row is found by key (``id = ANY(...)``, the runs by a LATERAL lookup); the
#: acks go as one JSON object, job id -> [fence, result]; the counters are upserted in
#: key order under one shard, so two batches lock shared rows in one order; the state
#: guard matches no partial index (:func:`guards.allowed_by_key`).
_COMPLETE = """
WITH clk AS ({now}),
acks AS MATERIALIZED (SELECT %s::jsonb AS m),
done AS (
  UPDATE boson_job j SET state = {completed}, attempt = j.attempt + 1, lease_holder = NULL,
    lease_expires_at = NULL, finalized_at = clk.now,
    expires_at = clk.now + COALESCE(j.retention_ms, %s) * INTERVAL '1 millisecond'
  FROM clk
  WHERE j.id = ANY(ARRAY(SELECT jsonb_object_keys((SELECT m FROM acks)) ORDER BY 1))
    AND j.fence = (((SELECT m FROM acks) -> j.id) ->> 0)::bigint
    AND {running} AND j.lease_expires_at > clk.now AND j.retention_ms IS DISTINCT FROM 0
  RETURNING j.id, j.task, j.queue, j.fence, j.attempt, j.attempted_at, j.run_at
),
runs AS (
  UPDATE boson_run r SET finished_at = clk.now, outcome = 'success', error = '', logs = '[]'::jsonb,
    recorded = FALSE
  FROM clk
  WHERE r.id = ANY(ARRAY(
    SELECT o.id FROM done CROSS JOIN LATERAL (
      SELECT id FROM boson_run WHERE job_id = done.id AND fence = done.fence AND finished_at IS NULL LIMIT 1
    ) AS o
  ))
),
results AS (
  INSERT INTO boson_job_data (job_id, kind, attempt, fence, at, data)
  SELECT done.id, 'result', done.attempt, done.fence, clk.now, (((SELECT m FROM acks) -> done.id) ->> 1)::jsonb
  FROM done, clk
  WHERE (((SELECT m FROM acks) -> done.id) ->> 1) IS NOT NULL
  ON CONFLICT (job_id, kind) DO UPDATE SET attempt = excluded.attempt, fence = excluded.fence,
    at = excluded.at, data = excluded.data
),
counted AS (
  INSERT INTO boson_throughput_minute (minute, queue, outcome, wait_bucket, shard, count)
  SELECT date_trunc('minute', clk.now), w.queue, {completed},
    e.b + CASE WHEN w.x >= power(2::float8, e.b + 1) THEN 1 WHEN w.x < power(2::float8, e.b) THEN -1 ELSE 0 END
      AS bucket,
    %s, COUNT(*)
  FROM clk, (
    SELECT done.queue,
      GREATEST((EXTRACT(EPOCH FROM COALESCE(done.attempted_at, clk.now) - done.run_at) * 1000)::float8, 0) + 1 AS x
    FROM done, clk
    OFFSET 0
  ) AS w
  CROSS JOIN LATERAL (SELECT floor(ln(w.x) / ln(2))::int AS b) AS e
  GROUP BY 1, 2, 4
  ORDER BY 2, 4
  ON CONFLICT (minute, queue, outcome, wait_bucket, shard)
    DO UPDATE SET count = boson_throughput_minute.count + excluded.count
)
{returned}
"""

#: What the statement returns: the store time and the completed ids as one row; with
#: ``details``, a row per completed job with what transition records need.
_IDS = "SELECT clk.now AS store_now, ARRAY(SELECT id FROM done) AS ids FROM clk"
_DETAILS = """SELECT done.id, done.task, done.queue, done.fence, done.attempted_at, clk.now AS store_now
FROM clk LEFT JOIN done ON TRUE"""


class PostgresAcks(AckStatements):
    completes_plain = True

    def complete_plain(
        self, connection: BaseDatabaseWrapper, acks: Sequence[tuple[str, int, str | None]], retention_ms: int,
        shard: int, *, details: bool,
    ) -> tuple[dict[str, Completed | None], datetime]:
        """Complete ``(job_id, fence, result JSON or None)`` leases that still hold, each job
        once (a job acked twice in a batch must take the general path); returns the
        completed jobs by id (each None without ``details``) and the store time. Runs as
        its own transaction unless the caller has one."""
        by_id = {job_id: [fence, result] for job_id, fence, result in acks}
        rows = one_statement(
            connection, complete_sql(details), [database.to_json(by_id), retention_ms, shard], planner=_PLANNER,
        )
        now = database.dt_not_null(rows[0]["store_now"])
        done: dict[str, Completed | None]
        if details:
            done = {
                row["id"]: Completed(row["id"], row["task"], row["queue"], row["fence"], database.dt_value(row["attempted_at"]))
                for row in rows if row["id"] is not None
            }
        else:
            done = dict.fromkeys(rows[0]["ids"])
        return done, now


@functools.cache
def complete_sql(details: bool) -> str:
    """The plain-success batch statement, reading the store clock inline."""
    return _COMPLETE.format(
        now=STORE_NOW, running=guards.allowed_by_key(Outcome.SUCCESS, "j.state"),
        completed=guards.state(JobState.COMPLETED), returned=_DETAILS if details else _IDS,
    )
