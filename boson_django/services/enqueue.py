"""enqueue: validate a batch, then insert it in one transaction, all or nothing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from boson_django import clock, conf, ids, policies, registry, tracing, transitions, validation
from boson_django.errors import DuplicateJobId, InvalidEnvelope
from boson_django.models import QuarantinedFingerprint
from boson_django.services import _db, config, enqueue_pg, history
from boson_django.services.types import EnqueueResult, Envelope
from boson_django.states import UNIQUE_HOLDING, JobState

CHUNK = 500
#: PostgreSQL: batches at least this large insert their keyless rows with COPY.
COPY_FROM = 100
_COLUMNS = (
    "id", "task", "queue", "state", "priority", "args", "kwargs", "meta", "unique_key",
    "fingerprint", "weight", "rate_class", "max_attempts", "retention_ms", "lease_ms",
    "timeout_ms", "crash_limit", "attempt", "crash_attempt", "fence", "charged_weight",
    "last_error", "run_at", "enqueued_at",
)
_JSON_COLUMNS = {"args", "kwargs", "meta"}
_HOLDING_SQL = ", ".join(f"'{s.value}'" for s in sorted(UNIQUE_HOLDING))
_CONFLICT = f"ON CONFLICT (unique_key) WHERE state IN ({_HOLDING_SQL}) AND unique_key IS NOT NULL DO NOTHING"


@dataclass
class _Row:
    """A validated envelope with every policy field resolved."""

    values: dict[str, Any]
    payload_bytes: int


def enqueue(
    envelopes: Iterable[Envelope], *, unique: bool = True, using: str | None = None
) -> list[EnqueueResult]:
    """Insert jobs, all or nothing, joining the caller's transaction if there is one.

    Validates every envelope before writing anything. An explicit id that exists raises
    ``DuplicateJobId``. A ``unique_key`` held by a non-terminal job yields
    ``disposition="duplicate"`` with that job's id: decided by the database's partial
    unique index (``INSERT ... ON CONFLICT DO NOTHING``), so concurrent enqueues of one
    key make one job. ``unique=False`` enqueues without claiming the key.
    """
    with tracing.enqueue_span(list(envelopes)) as batch:
        return _enqueue(batch, unique=unique, using=using)


@_db.store_transaction
def _enqueue(batch: list[Envelope], *, unique: bool, using: str) -> list[EnqueueResult]:
    if not batch:
        return []
    connection = _db.conn(using)
    tasks = {getattr(e, "task", None) or "" for e in batch}
    if _db.is_postgres(connection):  # one round trip for what SQLite reads in four queries
        looked = set(_fingerprints(batch))
        pre = enqueue_pg.preflight(connection, tasks, looked, _explicit_ids(batch))
        rows = [_prepare(env, i, pre.configs, unique) for i, env in enumerate(batch)]
        _refuse_duplicate_ids(rows, using, pre.existing_id)
        now, parked = pre.now, _parked(rows, pre.parked, looked, using)
    else:
        configs = config.task_configs(tasks, using)
        rows = [_prepare(env, i, configs, unique) for i, env in enumerate(batch)]
        _refuse_duplicate_ids(rows, using)
        now = clock.now(using)
        parked = _quarantined(rows, using)
    for row in rows:
        row.values["state"] = _initial_state(row.values, now, parked).value
        row.values["enqueued_at"] = now
    results = _insert_all(rows, connection)
    _record_parked(rows, results, parked, now, using)
    transitions.enqueued([row.values for row in rows], results, using)
    return results


def _prepare(env: Any, index: int, configs: dict[str, dict[str, Any]], unique: bool) -> _Row:
    if not isinstance(env, Envelope):
        raise InvalidEnvelope("envelope", f"must be an Envelope, got {type(env).__name__}", index=index)
    task = validation.name(env.task, "task", index=index, max_len=255)
    if not registry.is_registered(task):
        raise InvalidEnvelope("task", f"unknown task {task!r}: not a registered task", index=index)
    if not isinstance(env.args, (list, tuple)):
        raise InvalidEnvelope("args", f"must be a list, got {type(env.args).__name__}", index=index)
    if not isinstance(env.kwargs, dict):
        raise InvalidEnvelope("kwargs", f"must be a dict, got {type(env.kwargs).__name__}", index=index)
    if not isinstance(env.meta, dict):
        raise InvalidEnvelope("meta", f"must be a dict, got {type(env.meta).__name__}", index=index)
    texts = {f: validation.json_text(getattr(env, f), f, index=index) for f in ("args", "kwargs", "meta")}
    size = sum(len(t.encode()) for t in texts.values())
    limit = conf.get().MAX_PAYLOAD_BYTES
    if size > limit:
        largest = max(texts, key=lambda f: len(texts[f]))
        raise InvalidEnvelope(
            largest, f"payload (args+kwargs+meta) of {size} bytes exceeds MAX_PAYLOAD_BYTES={limit}", index=index
        )
    given = _given_policy(env, index)
    policy = config.resolve(task, given, configs.get(task, {}))
    values = {
        "id": validation.optional_name(env.id, "id", index=index, max_len=64) or ids.new_id(),
        "task": task,
        "queue": validation.name(policy["queue"], "queue", index=index),
        "priority": validation.priority(policy["priority"], index=index),
        "args": texts["args"], "kwargs": texts["kwargs"], "meta": texts["meta"],
        "unique_key": policy["unique_key"] if unique else None,
        "fingerprint": validation.optional_name(env.fingerprint, "fingerprint", index=index, max_len=64)
        or policy_fingerprint(task, env),
        "weight": validation.amount(policy["weight"], "weight", index=index),
        "rate_class": validation.optional_name(policy["rate_class"], "rate_class", index=index),
        "max_attempts": validation.whole(policy["max_attempts"], "max_attempts", minimum=1, index=index),
        "retention_ms": validation.whole(policy["retention_ms"], "retention_ms", index=index),
        "lease_ms": validation.whole(policy["lease_ms"], "lease_ms", minimum=1, index=index),
        "timeout_ms": validation.optional_whole(policy["timeout_ms"], "timeout_ms", minimum=1, index=index),
        "crash_limit": validation.whole(policy["crash_limit"], "crash_limit", minimum=1, index=index),
        "attempt": 0, "crash_attempt": 0, "fence": 0, "charged_weight": 0.0, "last_error": "",
        "run_at": env.run_at,
    }
    return _Row(values, size)


def _given_policy(env: Envelope, index: int) -> dict[str, Any]:
    """The envelope's own policy fields, validated (None = not given)."""
    return {
        "queue": validation.optional_name(env.queue, "queue", index=index),
        "priority": None if env.priority is None else validation.priority(env.priority, index=index),
        "unique_key": validation.optional_name(env.unique_key, "unique_key", index=index, max_len=255),
        "weight": None if env.weight is None else validation.amount(env.weight, "weight", index=index),
        "rate_class": validation.optional_name(env.rate_class, "rate_class", index=index),
        "max_attempts": validation.optional_whole(env.max_attempts, "max_attempts", minimum=1, index=index),
        "retention_ms": validation.optional_whole(env.retention_ms, "retention_ms", index=index),
        "lease_ms": validation.optional_whole(env.lease_ms, "lease_ms", minimum=1, index=index),
        "timeout_ms": validation.optional_whole(env.timeout_ms, "timeout_ms", minimum=1, index=index),
        "run_at": validation.aware(env.run_at, "run_at", index=index),
    }


def policy_fingerprint(task: str, env: Envelope) -> str:
    return policies.fingerprint(task, list(env.args), env.kwargs)


def _refuse_duplicate_ids(rows: Sequence[_Row], using: str, existing: Any = ...) -> None:
    """``existing``: the preflight's answer (PostgreSQL); otherwise one query here."""
    from boson_django.models import Job

    seen: set[str] = set()
    for row in rows:
        if row.values["id"] in seen:
            raise DuplicateJobId(f"job id {row.values['id']!r} appears twice in the batch")
        seen.add(row.values["id"])
    if existing is ...:
        existing = Job.objects.using(using).filter(id__in=seen).values_list("id", flat=True).first()
    if existing is not None:
        raise DuplicateJobId(f"job id {existing!r} already exists")


def _explicit_ids(batch: Sequence[Any]) -> list[str]:
    """The ids callers gave (generated ids are new by construction: no lookup for them)."""
    return [e.id for e in batch if isinstance(getattr(e, "id", None), str)]


def _fingerprints(batch: Sequence[Any]) -> list[str]:
    """The fingerprints the batch will have, for the preflight's quarantine lookup; an
    envelope too malformed to fingerprint is refused by ``_prepare`` anyway."""
    found = []
    for env in batch:
        given = getattr(env, "fingerprint", None)
        if isinstance(given, str):
            found.append(given)
            continue
        try:
            found.append(policy_fingerprint(env.task, env))
        except Exception:  # noqa: BLE001 -- _prepare names what is wrong
            continue
    return found


def _parked(rows: Sequence[_Row], holders: dict[str, Any], looked: set[str], using: str) -> dict[str, Any]:
    """The preflight's quarantined fingerprints; a row whose final fingerprint was not
    looked up there (it differs from the raw one) is looked up here."""
    missing = {row.values["fingerprint"] for row in rows} - looked
    if missing:
        found = QuarantinedFingerprint.objects.using(using).filter(fingerprint__in=missing)
        holders = {**holders, **{q.fingerprint: q for q in found}}
    return holders


def _quarantined(rows: Sequence[_Row], using: str) -> dict[str, QuarantinedFingerprint]:
    fingerprints = {row.values["fingerprint"] for row in rows}
    found = QuarantinedFingerprint.objects.using(using).filter(fingerprint__in=fingerprints)
    return {q.fingerprint: q for q in found}


def _initial_state(values: dict[str, Any], now: datetime, parked: dict[str, Any]) -> JobState:
    """Fill run_at before parking, so a quarantined row has one (the column is NOT NULL)."""
    due = values["run_at"] is None or values["run_at"] <= now
    if due:
        values["run_at"] = now
    if values["fingerprint"] in parked:
        return JobState.QUARANTINED
    return JobState.AVAILABLE if due else JobState.SCHEDULED


def _ensure_queues(names: set[str], connection: Any) -> None:
    values = ", ".join(["(%s, %s)"] * len(names))
    params: list[Any] = []
    for queue in sorted(names):
        params += [queue, False]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO boson_queue (name, paused) VALUES {values} ON CONFLICT (name) DO NOTHING",
            params,
        )


def _insert_all(rows: list[_Row], connection: Any) -> list[EnqueueResult]:
    """Insert, then map skipped rows to the live job holding their key (retrying a vanished holder)."""
    queues = {row.values["queue"] for row in rows}
    postgres = _db.is_postgres(connection)
    if not postgres:
        _ensure_queues(queues, connection)
    created: set[str] = set()
    pending = rows
    if postgres and len(rows) >= COPY_FROM:
        _ensure_queues(queues, connection)
        queues = set()
        keyless = [r for r in rows if r.values["unique_key"] is None]
        created |= enqueue_pg.copy_rows(connection, _COLUMNS, [r.values for r in keyless])
        pending = [r for r in rows if r.values["unique_key"] is not None]
        if not pending:
            return [_result(r, created, {}) for r in rows]
    for _ in range(10):
        for start in range(0, len(pending), CHUNK):
            created |= _insert_chunk(pending[start : start + CHUNK], connection, queues if postgres else set())
            queues = set()
        holders = _key_holders({r.values["unique_key"] for r in pending if r.values["id"] not in created}, connection)
        pending = [
            r for r in pending
            if r.values["id"] not in created and r.values["unique_key"] not in holders
        ]
        if not pending:
            return [_result(r, created, holders) for r in rows]
    raise IntegrityError("unique_key holder kept vanishing; enqueue gave up after 10 tries")


def _result(row: _Row, created: set[str], holders: dict[str, str]) -> EnqueueResult:
    if row.values["id"] in created:
        return EnqueueResult(row.values["id"], "created")
    return EnqueueResult(holders[row.values["unique_key"]], "duplicate")


def _insert_chunk(rows: list[_Row], connection: Any, queues: set[str]) -> set[str]:
    """``queues`` (PostgreSQL): queue rows to create in the same statement (a CTE)."""
    cast = _db.json_cast(connection)
    one = "(" + ", ".join(f"%s{cast}" if c in _JSON_COLUMNS else "%s" for c in _COLUMNS) + ")"
    params: list[Any] = []
    for row in rows:
        for column in _COLUMNS:
            value = row.values[column]
            params.append(_db.dt_param(connection, value) if isinstance(value, datetime) else value)
    sql = (
        f"INSERT INTO boson_job ({', '.join(_COLUMNS)}) VALUES {', '.join([one] * len(rows))} "
        f"{_CONFLICT} RETURNING id"
    )
    if queues:
        lanes = sorted(queues)
        sql = (f"WITH lanes AS (INSERT INTO boson_queue (name, paused) VALUES {', '.join(['(%s, FALSE)'] * len(lanes))} "
               f"ON CONFLICT (name) DO NOTHING) {sql}")
        params = [*lanes, *params]
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return {r[0] for r in cursor.fetchall()}
    except IntegrityError as exc:
        raise DuplicateJobId(f"a job id in this batch already exists ({exc})") from exc


def _key_holders(keys: set[Any], connection: Any) -> dict[str, str]:
    keys.discard(None)
    if not keys:
        return {}
    ordered = sorted(keys)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT unique_key, id FROM boson_job WHERE unique_key IN ({_db.placeholders(ordered)}) "
            f"AND state IN ({_HOLDING_SQL})",
            ordered,
        )
        return dict(cursor.fetchall())


def _record_parked(
    rows: list[_Row], results: list[EnqueueResult], parked: dict[str, Any], now: datetime, using: str
) -> None:
    """A job parked by a quarantined fingerprint gets an attempt record saying why."""
    for row, result in zip(rows, results):
        if result.disposition == "created" and row.values["state"] == JobState.QUARANTINED.value:
            holder = parked[row.values["fingerprint"]]
            history.record(
                row.values, outcome="quarantined", now=now, using=using,
                error=f"boson_django.errors.JobQuarantined: fingerprint {holder.fingerprint} is quarantined (job {holder.job_id} "
                f"reached the crash limit); release it to run this job",
            )
