"""enqueue: validate a batch, then insert it in one transaction, all or nothing.

On PostgreSQL one envelope enqueued outside any transaction is one autocommit statement
(:func:`enqueue_pg.insert_alone`); everything else runs in a store transaction that
joins the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.db import DatabaseError, IntegrityError

from boson_django import clock, conf, ids, policies, registry, tracing, transitions, validation
from boson_django.errors import DuplicateJobId, InvalidEnvelope
from boson_django.models import QuarantinedFingerprint
from boson_django import database, drivers
from boson_django.services import config, enqueue_pg, history, migrated, wakeups
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
_JSON_COLUMNS = frozenset({"args", "kwargs", "meta"})
_HOLDING_SQL = ", ".join(f"'{s.value}'" for s in sorted(UNIQUE_HOLDING))
_CONFLICT = f"ON CONFLICT (unique_key) WHERE state IN ({_HOLDING_SQL}) AND unique_key IS NOT NULL DO NOTHING"
#: How often a one-statement enqueue re-reads a TaskConfig row that changed under it
#: before it takes the transactional path instead.
_CONFIG_TRIES = 3

POLICY_CHECKS = validation.POLICY_CHECKS
#: The policy an envelope may give itself, in the order it is checked (``crash_limit``
#: comes from TaskConfig, code or settings only).
_GIVEN_CHECKS: dict[str, Callable[[Any, int], Any]] = {
    "queue": POLICY_CHECKS["queue"],
    "priority": POLICY_CHECKS["priority"],
    "unique_key": lambda v, i: validation.name(v, "unique_key", index=i, max_len=255, key=True),
    **{name: POLICY_CHECKS[name] for name in (
        "weight", "rate_class", "max_attempts", "retention_ms", "lease_ms", "timeout_ms")},
}

#: The checks of a task's defaults: its policy, and a fixed unique key when it has one.
_DEFAULT_CHECKS: dict[str, Callable[[Any, int], Any]] = {
    "unique_key": lambda v, i: None if v is None else _GIVEN_CHECKS["unique_key"](v, i),
    **POLICY_CHECKS,
}


@dataclass(frozen=True)
class Enqueued:
    """One envelope's result and its row (as written, when ``created``)."""

    result: EnqueueResult
    values: dict[str, Any]


def enqueue(
    envelopes: Iterable[Envelope], *, unique: bool = True, using: str | None = None
) -> list[EnqueueResult]:
    """Insert jobs, all or nothing, joining the caller's transaction if there is one.

    Validates every envelope; a call that raises writes nothing (a batch streamed into
    COPY is rolled back with its transaction or savepoint). An explicit id that exists raises
    ``DuplicateJobId``. A ``unique_key`` held by a non-terminal job yields
    ``disposition="duplicate"`` with that job's id: decided by the database's partial
    unique index (``INSERT ... ON CONFLICT DO NOTHING``), so concurrent enqueues of one
    key make one job. ``unique=False`` enqueues without claiming the key.

    Idle workers of the queues that got available jobs are woken when it commits
    (:func:`wakeups.notify_at_commit`).
    """
    with tracing.enqueue_span(list(envelopes)) as batch:
        results, rows = _submit(batch, unique, database.alias(using))
        tracing.enqueued(rows)
        return results


def enqueue_one(envelope: Envelope, *, using: str | None = None) -> Enqueued:
    """:func:`enqueue` of one envelope, with its row (the Tasks backend builds its result
    from it)."""
    with tracing.enqueue_span([envelope]) as batch:
        results, rows = _submit(batch, True, database.alias(using))
        tracing.enqueued(rows)
    return Enqueued(results[0], rows[0])


def _submit(batch: list[Envelope], unique: bool, using: str) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    """The batch inserted; ``StoreNotMigrated`` when it failed for want of boson's tables."""
    try:
        return _submit_to(batch, unique, using)
    except DatabaseError as exc:
        migrated.refuse_unmigrated(using, exc)
        raise


def _submit_to(batch: list[Envelope], unique: bool, using: str) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    connection = database.conn(using)
    if len(batch) == 1 and database.is_postgres(connection) and not connection.in_atomic_block:
        if connection.get_autocommit():  # connects first, as Django's does
            done = _enqueue_alone(batch[0], unique, using, connection)
            if done is not None:
                return [done.result], [done.values]
    return _enqueue(batch, unique=unique, using=using)


def _enqueue_alone(env: Envelope, unique: bool, using: str, connection: Any) -> Enqueued | None:
    """One envelope in one autocommit statement (:func:`enqueue_pg.insert_alone`): it
    reads the clock, the task's TaskConfig row and the fingerprint's quarantine itself,
    and sends the NOTIFY for the job it creates, so the notification goes out when it
    commits.

    The policy is first resolved assuming the task has no TaskConfig row. When the
    statement inserts nothing, the preflight query tells why: an explicit id that
    exists raises; another TaskConfig row resolves the policy again and retries; a unique
    key's visible holder makes the duplicate. ``None`` (nothing written) sends the rest
    -- a quarantined fingerprint, whose job needs an attempt record, a holder not yet
    visible, a TaskConfig row that keeps changing, a code default or setting that fails
    its check (the TaskConfig row may override it) -- to the transactional path.
    """
    channel = wakeups.channel(connection)
    checked = _Checks().check(env, None)
    task = checked["task"]
    assumed: dict[str, Any] | None = None
    for _ in range(_CONFIG_TRIES):
        try:
            values = _Policies({} if assumed is None else {task: assumed}).resolve(checked, None, unique)
        except InvalidEnvelope:
            if assumed is None:
                return None  # a default failing its check may be one the TaskConfig row overrides
            raise
        statement = enqueue_pg.alone_sql(_COLUMNS, _JSON_COLUMNS, _CONFLICT)
        inserted = enqueue_pg.insert_alone(connection, statement, values, assumed, channel)
        if inserted is not None:
            values.update(state=inserted.state, run_at=inserted.run_at, enqueued_at=inserted.enqueued_at)
            result = EnqueueResult(values["id"], "created")
            transitions.enqueued([values], [result], using)
            wakeups.notify_at_commit([values["queue"]], using, notified=channel is not None)
            return Enqueued(result, values)
        pre = enqueue_pg.preflight(connection, {task}, {values["fingerprint"]}, [values["id"]])
        _refuse_duplicate_ids([values], using, pre.existing_id)
        if pre.parked:
            return None
        if pre.configs.get(task) == assumed:
            holder = _key_holders({values["unique_key"]}, connection).get(values["unique_key"])
            return None if holder is None else Enqueued(EnqueueResult(holder, "duplicate"), values)
        assumed = pre.configs.get(task)
    return None


@database.store_transaction
def _enqueue(batch: list[Envelope], *, unique: bool, using: str) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    if not batch:
        return [], []
    connection = database.conn(using)
    if database.is_postgres(connection) and len(batch) >= COPY_FROM:
        return _enqueue_copied(batch, unique, connection, using)
    checks = _Checks()
    checked = [checks.check(env, i) for i, env in _numbered(batch)]
    tasks = {values["task"] for values in checked}
    parked: Mapping[str, Any]  # fingerprint -> what holds it in quarantine
    if database.is_postgres(connection):  # one round trip for what SQLite reads in four queries
        fingerprints = {values["fingerprint"] for values in checked}
        pre = enqueue_pg.preflight(connection, tasks, fingerprints, _explicit_ids(batch))
        fill = _Policies(pre.configs)
        rows = [fill.resolve(values, i, unique) for i, values in _numbered(checked)]
        _refuse_duplicate_ids(rows, using, pre.existing_id)
        now, parked = pre.now, pre.parked
    else:
        fill = _Policies(config.task_configs(tasks, using))
        rows = [fill.resolve(values, i, unique) for i, values in _numbered(checked)]
        _refuse_duplicate_ids(rows, using)
        now = clock.now(using)
        parked = _quarantined(rows, using)
    for values in rows:
        values["state"] = _initial_state(values, now, parked).value
        values["enqueued_at"] = now
    results = _insert_all(rows, connection)
    _record_parked(rows, results, parked, now, using)
    transitions.enqueued(rows, results, using)
    wakeups.notify_at_commit(_available_queues(rows, results), using)
    return results, rows


def _available_queues(rows: list[dict[str, Any]], results: list[EnqueueResult]) -> Iterator[str]:
    """The queues that got a job a worker may start now (not a duplicate, scheduled or
    parked one); lazily: nothing is read when no worker is to be woken."""
    return (
        values["queue"] for values, result in zip(rows, results)
        if result.disposition == "created" and values["state"] == JobState.AVAILABLE.value
    )


def _enqueue_copied(
    batch: list[Envelope], unique: bool, connection: Any, using: str
) -> tuple[list[EnqueueResult], list[dict[str, Any]]]:
    """PostgreSQL, ``COPY_FROM`` envelopes or more: each envelope is checked, completed
    and streamed into COPY in one pass (:func:`_keyless`), so the server inserts while
    Python checks -- two cores at work instead of one after the other. What needs every
    row waits for the end of the stream: a repeated or existing id raises (after every
    envelope was checked, as on the other paths), the quarantined fingerprints are read
    and park their rows; an error rolls the transaction back, COPYed rows included."""
    pre = enqueue_pg.preflight(connection, _tasks(batch), (), _explicit_ids(batch))
    rows: list[dict[str, Any]] = []
    copied = enqueue_pg.copy_rows(connection, _COLUMNS, _keyless(batch, unique, pre, rows))
    _refuse_duplicate_ids(rows, using, pre.existing_id)
    parked = enqueue_pg.preflight(connection, (), {values["fingerprint"] for values in rows}, ()).parked
    _park(rows, parked, copied, connection)
    results = _insert_all(rows, connection, copied)
    _record_parked(rows, results, parked, pre.now, using)
    transitions.enqueued(rows, results, using)
    wakeups.notify_at_commit(_available_queues(rows, results), using)
    return results, rows


def _keyless(
    batch: list[Envelope], unique: bool, pre: enqueue_pg.Preflight, rows: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """Check and complete each envelope into ``rows``; yield the rows to COPY: keyless,
    with an id not seen earlier in the batch, and none when an explicit id exists (those
    raise once the stream ends)."""
    checks, fill = _Checks(), _Policies(pre.configs)
    seen: set[str] = set()
    for i, env in _numbered(batch):
        values = fill.resolve(checks.check(env, i), i, unique)
        values["state"] = _initial_state(values, pre.now, {}).value
        values["enqueued_at"] = pre.now
        rows.append(values)
        if values["unique_key"] is None and values["id"] not in seen and pre.existing_id is None:
            yield values
        seen.add(values["id"])


def _park(rows: list[dict[str, Any]], parked: Mapping[str, Any], copied: set[str], connection: Any) -> None:
    """Rows of quarantined fingerprints start quarantined; those already COPYed change
    state in place (in the same transaction: nobody saw them otherwise)."""
    moved = [values for values in rows if values["fingerprint"] in parked]
    for values in moved:
        values["state"] = JobState.QUARANTINED.value
    written = [values["id"] for values in moved if values["id"] in copied]
    if written:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE boson_job SET state = %s WHERE id = ANY(%s)", [JobState.QUARANTINED.value, written])


class _Checks:
    """Validates what envelopes say themselves, for one call (each task's registration
    is looked up once)."""

    def __init__(self) -> None:
        self._registered: set[str] = set()
        self._limit = conf.get().MAX_PAYLOAD_BYTES

    def check(self, env: Any, index: int | None) -> dict[str, Any]:
        """The envelope's own fields, validated; the policy fields it gives (not None)."""
        if not isinstance(env, Envelope):
            raise InvalidEnvelope("envelope", f"must be an Envelope, got {type(env).__name__}", index=index)
        task = env.task
        if type(task) is not str or task not in self._registered:
            task = self._task(task, index)
        values: dict[str, Any] = {"task": task, **_payload(env, self._limit, index)}
        for name, check in _GIVEN_CHECKS.items():
            given = getattr(env, name)
            if given is not None:
                values[name] = check(given, index)
        run_at, given_id, fingerprint = env.run_at, env.id, env.fingerprint
        values["run_at"] = None if run_at is None else validation.aware(run_at, "run_at", index=index)
        values["id"] = ids.new_id() if given_id is None else validation.job_id(given_id, index=index)
        values["fingerprint"] = (
            policy_fingerprint(task, env) if fingerprint is None
            else validation.name(fingerprint, "fingerprint", index=index, max_len=64, key=True)
        )
        values.update(_FRESH)
        return values

    def _task(self, task: Any, index: int | None) -> str:
        task = validation.name(task, "task", index=index, max_len=255)
        if not registry.is_registered(task):
            why = registry.why_unknown(task)
            raise InvalidEnvelope("task", f"unknown task {task!r}: not a module-level task of a boson backend ({why})", index=index)
        self._registered.add(task)
        return task


#: The counters every new job starts with.
_FRESH = {"attempt": 0, "crash_attempt": 0, "fence": 0, "charged_weight": 0.0, "last_error": ""}


@dataclass
class _Policies:
    """Completes checked envelopes into job rows for one call: what an envelope left
    unset comes from TaskConfig (``configs``), then @task defaults, then settings. Each
    task's defaults are resolved and checked once; a default that fails its check is an
    error only for the envelopes that rely on it, reported at the first one."""

    configs: dict[str, dict[str, Any]]
    _defaults: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    def resolve(self, values: dict[str, Any], index: int | None, unique: bool) -> dict[str, Any]:
        """A new row: ``values`` over the task's defaults."""
        valid, invalid = self._defaults.get(values["task"]) or self._resolve(values["task"])
        for name in invalid.keys() - values.keys() if invalid else ():
            if name != "unique_key" or unique:  # unique=False stores no key: the task's is not used
                _DEFAULT_CHECKS[name](invalid[name], index)  # raises, naming the field
        row = {**valid, **values}
        if not unique:
            row["unique_key"] = None
        elif values["task"] in self.configs:
            uniqueness = self.configs[values["task"]].get("uniqueness")
            row["unique_key"] = policies.unique_key_under(uniqueness, row["unique_key"], row["fingerprint"])
        return row

    def _resolve(self, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
        row = self.configs.get(task)
        resolved = _checked_defaults(config.resolve(task, {}, row)) if row else _code_defaults(task)
        self._defaults[task] = resolved
        return resolved


#: A task's resolved defaults when it has no TaskConfig row, kept across calls (a one-job
#: enqueue resolved them on every call: ~11 of its ~25 us of Python) with what they came
#: from -- the settings object (``override_settings`` makes a new one) and the registered
#: Task (frozen) -- and used only while both are still the ones in force.
_CODE_DEFAULTS: dict[str, tuple[Any, Any, tuple[dict[str, Any], dict[str, Any]]]] = {}


def _code_defaults(task: str) -> tuple[dict[str, Any], dict[str, Any]]:
    settings, code = conf.get(), registry.get(task)
    known = _CODE_DEFAULTS.get(task)
    if known is not None and known[0] is settings and known[1] is code:
        return known[2]
    resolved = _checked_defaults(config.resolve(task, {}, {}))
    _CODE_DEFAULTS[task] = settings, code, resolved
    return resolved


def _checked_defaults(base: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The defaults that pass their check, and those that fail it (an error only for the
    envelopes that rely on them)."""
    valid, invalid = {}, {}
    for name, check in _DEFAULT_CHECKS.items():
        try:
            valid[name] = check(base[name], 0)
        except InvalidEnvelope:
            invalid[name] = base[name]
    return valid, invalid


_T = TypeVar("_T")


def _numbered(items: Sequence[_T]) -> Iterator[tuple[int | None, _T]]:
    """Each item with the index an error names it by: none for a batch of one, so that
    ``task.enqueue(...)``, which never saw a list, is told ``args: ...``, not
    ``envelope[0].args: ...``."""
    if len(items) == 1:
        yield None, items[0]
    else:
        yield from enumerate(items)


def _payload(env: Envelope, limit: int, index: int | None) -> dict[str, str]:
    """args, kwargs and meta as JSON text, within ``limit`` (MAX_PAYLOAD_BYTES) together."""
    if not isinstance(env.args, (list, tuple)):
        raise InvalidEnvelope("args", f"must be a list, got {type(env.args).__name__}", index=index)
    if not isinstance(env.kwargs, dict):
        raise InvalidEnvelope("kwargs", f"must be a dict, got {type(env.kwargs).__name__}", index=index)
    if not isinstance(env.meta, dict):
        raise InvalidEnvelope("meta", f"must be a dict, got {type(env.meta).__name__}", index=index)
    texts = {
        "args": validation.json_text(env.args, "args", index=index),
        "kwargs": validation.json_text(env.kwargs, "kwargs", index=index),
        "meta": validation.json_text(env.meta, "meta", index=index),
    }
    size = len(texts["args"]) + len(texts["kwargs"]) + len(texts["meta"])  # ASCII JSON: characters are bytes
    if size > limit:
        largest = max(texts, key=lambda f: len(texts[f]))
        raise InvalidEnvelope(
            largest, f"payload (args+kwargs+meta) of {size} bytes exceeds MAX_PAYLOAD_BYTES={limit}", index=index
        )
    return texts


def policy_fingerprint(task: str, env: Envelope) -> str:
    return policies.fingerprint(task, list(env.args), env.kwargs)


def _refuse_duplicate_ids(rows: Sequence[dict[str, Any]], using: str, existing: Any = ...) -> None:
    """``existing``: the preflight's answer (PostgreSQL); otherwise read here."""
    seen: set[str] = set()
    for values in rows:
        if values["id"] in seen:
            raise DuplicateJobId(f"job id {values['id']!r} appears twice in the batch")
        seen.add(values["id"])
    if existing is ...:
        existing = _first_existing(list(seen), using)
    if existing is not None:
        raise DuplicateJobId(f"job id {existing!r} already exists")


def _first_existing(ids: list[str], using: str) -> str | None:
    """One of ``ids`` the store holds already, looked up as many at a time as SQLite lets
    one statement list (a batch of more ids failed with "too many SQL variables")."""
    from boson_django.models import Job

    jobs = Job.objects.using(using)
    for part in database.in_slices(ids, database.most_listed(database.conn(using))):
        found = jobs.filter(id__in=part).values_list("id", flat=True).first()
        if found is not None:
            return str(found)
    return None


def _explicit_ids(batch: Sequence[Any]) -> list[str]:
    """The ids callers gave (generated ids are new by construction: no lookup for them)."""
    return [e.id for e in batch if isinstance(getattr(e, "id", None), str)]


def _tasks(batch: Sequence[Any]) -> set[str]:
    """The task names of envelopes not checked yet (a bad one is refused by the check)."""
    return {e.task for e in batch if isinstance(getattr(e, "task", None), str)}


def _quarantined(rows: Sequence[dict[str, Any]], using: str) -> dict[str, QuarantinedFingerprint]:
    fingerprints = list({values["fingerprint"] for values in rows})
    parked = QuarantinedFingerprint.objects.using(using)
    return {q.fingerprint: q for part in database.in_slices(fingerprints, database.most_listed(database.conn(using)))
            for q in parked.filter(fingerprint__in=part)}


def _initial_state(values: dict[str, Any], now: datetime, parked: Mapping[str, Any]) -> JobState:
    """Fill run_at before parking, so a quarantined row has one (the column is NOT NULL)."""
    due = values["run_at"] is None or values["run_at"] <= now
    if due:
        values["run_at"] = now
    if values["fingerprint"] in parked:
        return JobState.QUARANTINED
    return JobState.AVAILABLE if due else JobState.SCHEDULED


def _ensure_queues(names: set[str], connection: Any) -> None:
    with connection.cursor() as cursor:
        for part in database.in_slices(sorted(names), database.most_listed(connection, each=2)):
            cursor.execute(
                f"INSERT INTO boson_queue (name, paused) VALUES {', '.join(['(%s, %s)'] * len(part))} "
                "ON CONFLICT (name) DO NOTHING",
                [value for queue in part for value in (queue, False)],
            )


def _insert_all(rows: list[dict[str, Any]], connection: Any, copied: set[str] | None = None) -> list[EnqueueResult]:
    """Insert the rows not ``copied`` already and the queue rows, then map skipped rows to
    the live job holding their key (retrying a vanished holder)."""
    queues = {values["queue"] for values in rows}
    postgres = database.is_postgres(connection)
    created = set(copied or ())
    pending = [values for values in rows if values["id"] not in created] if created else rows
    if not postgres or not pending:  # PostgreSQL creates them in the first INSERT otherwise
        _ensure_queues(queues, connection)
        queues = set()
    if not pending:
        return [_result(values, created, {}) for values in rows]
    pending = _in_key_order(pending)
    size = min(CHUNK, database.most_listed(connection, each=len(_COLUMNS)))
    for _ in range(10):
        for part in database.in_slices(pending, size):
            created |= _insert_chunk(part, connection, queues if postgres else set())
            queues = set()
        holders = _key_holders({v["unique_key"] for v in pending if v["id"] not in created}, connection)
        pending = [v for v in pending if v["id"] not in created and v["unique_key"] not in holders]
        if not pending:
            return [_result(values, created, holders) for values in rows]
    raise IntegrityError("unique_key holder kept vanishing; enqueue gave up after 10 tries")


def _in_key_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with unique keys first, in key order: an insert waits on a key another
    uncommitted transaction inserted, so two batches sharing keys in different orders
    deadlocked (measured: 6 threads enqueueing 60 shared keys, shuffled, about one run in
    eight). Stable, so the first of two rows with one key in a batch still wins; the
    results keep the caller's order."""
    return sorted(rows, key=lambda values: (values["unique_key"] is None, values["unique_key"] or ""))


def _result(values: dict[str, Any], created: set[str], holders: dict[str, str]) -> EnqueueResult:
    if values["id"] in created:
        return EnqueueResult(values["id"], "created")
    return EnqueueResult(holders[values["unique_key"]], "duplicate")


def _insert_chunk(rows: list[dict[str, Any]], connection: Any, queues: set[str]) -> set[str]:
    """``queues`` (PostgreSQL): queue rows to create in the same statement (a CTE)."""
    cast = drivers.for_connection(connection).json_cast()
    one = "(" + ", ".join(f"%s{cast}" if c in _JSON_COLUMNS else "%s" for c in _COLUMNS) + ")"
    params: list[Any] = []
    for values in rows:
        for column in _COLUMNS:
            value = values[column]
            params.append(database.dt_param(connection, value) if isinstance(value, datetime) else value)
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
    holders: dict[str, str] = {}
    with connection.cursor() as cursor:
        for part in database.in_slices(sorted(keys), database.most_listed(connection)):
            cursor.execute(
                f"SELECT unique_key, id FROM boson_job WHERE unique_key IN ({database.placeholders(part)}) "
                f"AND state IN ({_HOLDING_SQL})",
                part,
            )
            holders.update(cursor.fetchall())
    return holders


def _record_parked(
    rows: list[dict[str, Any]], results: list[EnqueueResult], parked: Mapping[str, Any], now: datetime, using: str
) -> None:
    """A job parked by a quarantined fingerprint gets an attempt record saying why."""
    for values, result in zip(rows, results):
        if result.disposition == "created" and values["state"] == JobState.QUARANTINED.value:
            holder = parked[values["fingerprint"]]
            history.record(
                values, outcome="quarantined", now=now, using=using,
                error=f"boson_django.errors.JobQuarantined: fingerprint {holder.fingerprint} is quarantined (job {holder.job_id} "
                f"reached the crash limit); release it to run this job",
            )
