"""PostgreSQL fast path of ack_many: the common ack as one statement.

Most acks a worker sends are plain successes: no error, no log lines, no weight
correction, a job that keeps its row. For a batch of those, completing the jobs whose
lease holds (same fence, still ``running``, unexpired on the store clock), closing their
runs, storing their results and counting them is one data-modifying statement: one
round trip and one commit for the batch. The jobs' update takes their row locks (in id
order, the order of its index scan) with the lease checks in its own ``WHERE``:
PostgreSQL checks them again on the newest version of a row another transaction changed
meanwhile (a reclaim, a cancel), so no separate ``FOR UPDATE`` pass is needed -- it wrote
a lock record per job (310 of a flush's 2,133 WAL records for 300 acks, ~0.4 ms of its
~5 ms). A lease that fails its check is simply not matched -- nothing of it is written --
and :func:`boson_django.services.ack_many` sends it down the general path, which says why.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from boson_django import database
from boson_django.drivers.postgresql import session
from boson_django.drivers.postgresql.clock import STORE_NOW
from boson_django.services import throughput

#: Sequential scans off, so a plan made while the run table looked empty (a new store,
#: or statistics older than the runs since: a prepared statement's generic plan outlives
#: them) still finds each run by its job: with them on, that plan read the whole run
#: table twice per flush, and a drain at concurrency 10 fell from ~3,000 to ~500 jobs/s
#: over 20,000 jobs as the runs piled up. The jobs and runs written are named by key
#: (``id = ANY(ARRAY(...))``), so no join order depends on the statistics. JIT off for
#: the same reason as the claim's (``claim_pg._PLANNER``): the disabled scans' cost
#: penalty is above ``jit_above_cost``.
_PLANNER = ("enable_seqscan = off", "jit = off")

#: The wait bucket is ``throughput.wait_bucket``'s exact floor(log2(wait_ms + 1)): wait_ms
#: from the exact interval, the float log2 estimate corrected against powers of two. The
#: wait is computed once per job (``OFFSET 0`` keeps its subquery from being flattened:
#: flattened, its numeric ``EXTRACT`` ran once for each of the three places that use it,
#: 0.49 against 0.25 ms of a flush of 300).
#: Every row is found by key (``id = ANY(...)``, the runs by a LATERAL lookup), so the
#: plan does not depend on the estimates of a queue table's statistics, which are often
#: stale (a plan driven by a partial index the statistics think nearly empty compares
#: every pair of rows). The counters are upserted in key order under one shard
#: (``throughput.Tally`` does the same), so two flushes lock shared rows in one order.
#: The acks go as one JSON object, job id -> [fence, result], read
#: once (the ``acks`` CTE) and looked up by key per job. The state test is written so
#: that it matches no partial index (``database.in_state``): with ``state = 'running'`` beside
#: the key the planner took the partial index of running jobs and filtered all of them
#: for each ack (29 ms for 256 acks with 256 running, against the primary key's 3 ms,
#: measured).
_COMPLETE = """
WITH clk AS ({now}),
acks AS MATERIALIZED (SELECT %s::jsonb AS m),
done AS (
  UPDATE boson_job j SET state = 'completed', attempt = j.attempt + 1, lease_holder = NULL,
    lease_expires_at = NULL, finalized_at = clk.now,
    expires_at = clk.now + COALESCE(j.retention_ms, %s) * INTERVAL '1 millisecond'
  FROM clk
  WHERE j.id = ANY(ARRAY(SELECT jsonb_object_keys((SELECT m FROM acks)) ORDER BY 1))
    AND j.fence = (((SELECT m FROM acks) -> j.id) ->> 0)::bigint
    AND j.{running} AND j.lease_expires_at > clk.now AND j.retention_ms IS DISTINCT FROM 0
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
  SELECT date_trunc('minute', clk.now), w.queue, 'completed',
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

#: What the statement returns: the store time and the completed jobs' ids, as one row
#: (an array, read by psycopg's C loader); with ``details``, a row per completed job with
#: what transition records need. Returning those columns for every flush, with the
#: store time repeated per row, cost the worker ~3 us per job to read back, for records
#: no one listens to unless transitions are observed.
_IDS = "SELECT clk.now AS store_now, ARRAY(SELECT id FROM done) AS ids FROM clk"
_DETAILS = """SELECT done.id, done.task, done.queue, done.fence, done.attempted_at, clk.now AS store_now
FROM clk LEFT JOIN done ON TRUE"""


class Completed(NamedTuple):
    """A job the statement completed (what transitions and replies need of it)."""

    id: str
    task: str
    queue: str
    fence: int
    attempted_at: datetime | None


def complete(
    connection: Any, acks: Sequence[tuple[str, int, str | None]], retention_ms: int, *, details: bool = False
) -> tuple[dict[str, Completed | None], datetime]:
    """Complete ``(job_id, fence, result JSON or None)`` leases that still hold; returns the
    completed jobs by id and the store time. Leases that no longer hold are left out. Each
    job appears once (``ack_many`` sends a job acked twice in a batch down the general path).
    Without ``details`` only the ids are read back (each maps to None).

    The acks go as one JSON object rather than three arrays: psycopg dumps a list
    parameter element by element in Python (~1 us each, three per ack), the JSON encoder
    the whole batch in C."""
    by_id = {job_id: [fence, result] for job_id, fence, result in acks}
    rows = session.one_statement(
        connection, _sql(details), [database.to_json(by_id), retention_ms, random.randrange(throughput.SHARDS)],
        planner=_PLANNER,
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
def _sql(details: bool) -> str:
    return _COMPLETE.format(now=STORE_NOW, running=database.in_state("running"), returned=_DETAILS if details else _IDS)
